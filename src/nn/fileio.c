// Whole-file reads and atomic whole-file writes (see fileio.h).
#include "fileio.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#ifndef __wasi__
#include <signal.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static _Thread_local gk_nn_fault pending_fault;

void gk_nn_inject_fault(gk_nn_fault fault) { pending_fault = fault; }

// Whether the injected fault is `step`; if so it is used up and errno is set
// to EIO, as a failing system call would.
static int fault_at(gk_nn_fault step) {
  if (pending_fault != step) return 0;
  pending_fault = GK_NN_FAULT_NONE;
  errno = EIO;
  return 1;
}

// "a directory", "a FIFO", ... for messages.
static const char *file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

gk_status gk_nn_read_file(const char *path, const char *what, unsigned char **data, size_t *size) {
  if (!path || !what || !data || !size) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_nn_read_file: a pointer argument is NULL");
  *data = NULL;
  *size = 0;
  // A FIFO or a device is refused before it is opened (opening a FIFO waits
  // for a writer); O_NONBLOCK keeps the open from waiting should the path be
  // replaced by one in between, and fstat checks again what was opened.
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
    return gk_nn_fail(GK_NN_ERR_FILE, "%s '%s' is not a regular file (it is %s)", what, path, file_kind(st.st_mode));
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return gk_nn_fail(GK_NN_ERR_FILE, "%s '%s': cannot open: %s", what, path, strerror(errno));
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return gk_nn_fail(GK_NN_ERR_FILE, "%s '%s': cannot stat: %s", what, path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return gk_nn_fail(GK_NN_ERR_FILE, "%s '%s' is not a regular file (it is %s)", what, path, file_kind(st.st_mode));
  }
  // Files of /proc claim 0 bytes and yet have contents: a 0-byte file must
  // really be empty.
  unsigned char probe;
  if (st.st_size == 0 && read(fd, &probe, 1) > 0) {
    close(fd);
    return gk_nn_fail(GK_NN_ERR_FILE, "%s '%s' is not a regular file (it has contents but a size of 0 bytes, as the "
                   "files of /proc do)", what, path);
  }
  if ((uintmax_t)st.st_size >= (uintmax_t)SIZE_MAX) {
    close(fd);
    return gk_nn_fail(GK_NN_ERR_FILE, "%s '%s' is too large (%jd bytes)", what, path, (intmax_t)st.st_size);
  }
  size_t n = (size_t)st.st_size;
  unsigned char *buf = malloc(n + 1);
  if (!buf) {
    close(fd);
    return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "%s '%s': cannot allocate %zu bytes", what, path, n + 1);
  }
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      int e = errno;
      free(buf);
      close(fd);
      if (r == 0)
        return gk_nn_fail(GK_NN_ERR_FILE, "%s '%s' shrank while it was read (%zu of %zu bytes)", what, path, got, n);
      return gk_nn_fail(GK_NN_ERR_FILE, "%s '%s': read failed: %s", what, path, strerror(e));
    }
    got += (size_t)r;
  }
  close(fd);
  buf[n] = 0;
  *data = buf;
  *size = n;
  return GK_SUCCESS;
}

// Write all of buf, retrying short writes. Returns 0, or -1 with errno set.
static int write_all(int fd, const unsigned char *buf, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, buf, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return -1;
    buf += w;
    n -= (size_t)w;
  }
  return 0;
}

// The directory part of path ("." when there is none) into dir.
static void dir_of(const char *path, char *dir, size_t size) {
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(dir, size, ".");
  else if (slash == path) snprintf(dir, size, "/");
  else snprintf(dir, size, "%.*s", (int)(slash - path), path);
}

#ifdef __wasi__
// WASI (WebAssembly) has no process ids: a run tags its temporary files with
// the clock's nanoseconds at its first one instead.
static long process_tag(void) {
  static long tag;
  if (!tag) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    tag = now.tv_nsec + 1;
  }
  return tag;
}
#else
static long process_tag(void) { return (long)getpid(); }
#endif

// Create a new temporary file "<path>.tmp-<pid>-<n>" (its name into tmp, of
// `size` bytes) and return its descriptor, or -1 with errno set.
static int create_temp(const char *path, char *tmp, size_t size) {
  static _Atomic unsigned counter;
  for (int attempt = 0; attempt < 100; attempt++) {
    snprintf(tmp, size, "%s.tmp-%ld-%u", path, process_tag(), counter++);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;  // errno is EEXIST
}

gk_status gk_nn_write_atomic(const char *path, const char *what, const gk_nn_chunk *chunks, size_t nchunks) {
  if (!path || !what || (!chunks && nchunks))
    return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_nn_write_atomic: a pointer argument is NULL");
  if (!*path) return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: the file name is empty", what);
  size_t plen = strlen(path);
  if (path[plen - 1] == '/') return gk_nn_fail(GK_NN_ERR_FILE, "%s '%s' names a directory, not a file", what, path);
  char *tmp = malloc(plen + 64);
  if (!tmp) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "%s '%s': cannot allocate a file name", what, path);

  // 1. A new temporary file beside the target.
  int fd = fault_at(GK_NN_FAULT_OPEN) ? -1 : create_temp(path, tmp, plen + 64);
  if (fd < 0) {
    int e = errno;
    free(tmp);
    return gk_nn_fail(GK_NN_ERR_FILE, "%s '%s': cannot create a temporary file beside it: %s", what, path, strerror(e));
  }

  // 2. Every byte, then fsync and close.
  const char *failed = NULL;
  for (size_t i = 0; i < nchunks && !failed; i++) {
    const unsigned char *p = chunks[i].data;
    size_t n = chunks[i].size;
    if (n && !p) {
      close(fd);
      unlink(tmp);
      free(tmp);
      return gk_nn_fail(GK_ERR_NULL_POINTER, "%s '%s': piece %zu of the file has %zu bytes but no data", what, path, i, n);
    }
    if (pending_fault == GK_NN_FAULT_WRITE) {
      if (write_all(fd, p, n / 2) != 0 || fault_at(GK_NN_FAULT_WRITE)) failed = "write";
    } else if (write_all(fd, p, n) != 0) {
      failed = "write";
    }
  }
  if (!failed && fault_at(GK_NN_FAULT_WRITE)) failed = "write";  // a fault injected for a file with no bytes
  if (!failed && (fault_at(GK_NN_FAULT_FSYNC) || fsync(fd) != 0)) failed = "fsync";
  int e = errno;
  if (fault_at(GK_NN_FAULT_CLOSE) || close(fd) != 0) {
    if (!failed) {
      failed = "close";
      e = errno;
    }
  }
  // 3. The rename replaces the target in one step.
  if (!failed && (fault_at(GK_NN_FAULT_RENAME) || rename(tmp, path) != 0)) {
    failed = "rename";
    e = errno;
  }
  if (failed) {
    unlink(tmp);
    free(tmp);
    return gk_nn_fail(GK_NN_ERR_FILE, "%s '%s': %s failed: %s (the file was left as it was)", what, path, failed,
                   strerror(e));
  }

  // 4. Make the rename durable (tmp's buffer is long enough for the directory).
  char *dir = tmp;
  dir_of(path, dir, plen + 64);
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0 || fsync(dfd) != 0) {
    e = errno;
    if (dfd >= 0) close(dfd);
    gk_status s = gk_nn_fail(GK_NN_ERR_FILE, "%s '%s' was written, but its directory '%s' could not be synced: %s", what,
                          path, dir, strerror(e));
    free(tmp);
    return s;
  }
  close(dfd);
  free(tmp);
  return GK_SUCCESS;
}

gk_status gk_nn_check_writable(const char *path, const char *what) {
  if (!path || !what) return gk_nn_fail(GK_ERR_NULL_POINTER, "gk_nn_check_writable: a pointer argument is NULL");
  if (!*path) return gk_nn_fail(GK_ERR_INVALID_VALUE, "%s: the file name is empty", what);
  size_t plen = strlen(path);
  struct stat st;
  if (path[plen - 1] == '/' || (stat(path, &st) == 0 && S_ISDIR(st.st_mode)))
    return gk_nn_fail(GK_NN_ERR_FILE, "%s '%s' is a directory, not a file", what, path);
  char *tmp = malloc(plen + 64);
  if (!tmp) return gk_nn_fail(GK_ERR_OUT_OF_MEMORY, "%s '%s': cannot allocate a file name", what, path);
  gk_status s = GK_SUCCESS;
  dir_of(path, tmp, plen + 64);
  if (stat(tmp, &st) != 0) {
    s = gk_nn_fail(GK_NN_ERR_FILE, "%s '%s': the directory '%s' %s", what, path, tmp,
                errno == ENOENT ? "does not exist" : strerror(errno));
  } else if (!S_ISDIR(st.st_mode)) {
    s = gk_nn_fail(GK_NN_ERR_FILE, "%s '%s': '%s' is not a directory", what, path, tmp);
  } else {
    // The one sure test: create the temporary file gk_nn_write_atomic would.
    int fd = create_temp(path, tmp, plen + 64);
    if (fd < 0) {
      int e = errno;
      dir_of(path, tmp, plen + 64);
      s = gk_nn_fail(GK_NN_ERR_FILE, "%s '%s': cannot create a file in the directory '%s': %s", what, path, tmp,
                  strerror(e));
    } else {
      close(fd);
      unlink(tmp);
    }
  }
  free(tmp);
  return s;
}

int gk_nn_same_file(const char *a, const char *b) {
  if (!a || !b) return 0;
  struct stat sa, sb;
  int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
  if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  if (ea || eb) return 0;
  // Neither exists: the same name in the same directory.
  const char *na = strrchr(a, '/'), *nb = strrchr(b, '/');
  na = na ? na + 1 : a;
  nb = nb ? nb + 1 : b;
  if (strcmp(na, nb)) return 0;
  size_t la = strlen(a) + 2, lb = strlen(b) + 2;
  char *da = malloc(la), *db = malloc(lb);
  int same = 0;
  if (da && db) {
    dir_of(a, da, la);
    dir_of(b, db, lb);
    same = stat(da, &sa) == 0 && stat(db, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  }
  free(da);
  free(db);
  return same;
}

// Whether `name` is "<base>.tmp-<pid>-<n>" (the name create_temp makes); the
// pid into *pid.
static int temp_name_of(const char *name, const char *base, long *pid) {
  size_t n = strlen(base);
  if (strncmp(name, base, n) || strncmp(name + n, ".tmp-", 5)) return 0;
  const char *s = name + n + 5;
  if (*s < '0' || *s > '9') return 0;
  char *end;
  errno = 0;
  *pid = strtol(s, &end, 10);
  if (errno || *pid <= 0 || *end != '-' || end[1] < '0' || end[1] > '9') return 0;
  for (s = end + 1; *s; s++)
    if (*s < '0' || *s > '9') return 0;
  return 1;
}

// Whether the process that named a temporary file `pid` may still be writing
// it: this process, or any that kill(pid, 0) does not report missing (it
// sends nothing: ESRCH says no process has this pid). WASI cannot tell, so
// there every temporary file is kept.
static int writer_may_be_alive(long pid) {
#ifdef __wasi__
  (void)pid;
  return 1;
#else
  if (pid == (long)getpid()) return 1;
  return kill((pid_t)pid, 0) == 0 || errno != ESRCH;
#endif
}

int gk_nn_remove_stale_temps(const char *path) {
  if (!path || !*path) return 0;
  size_t plen = strlen(path);
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  char *dir = malloc(plen + 2);
  if (!dir) return 0;
  dir_of(path, dir, plen + 2);
  DIR *d = *base ? opendir(dir) : NULL;
  int removed = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    long pid;
    if (!temp_name_of(e->d_name, base, &pid) || writer_may_be_alive(pid)) continue;
    size_t n = strlen(dir) + strlen(e->d_name) + 2;
    char *full = malloc(n);
    if (!full) break;
    snprintf(full, n, "%s/%s", dir, e->d_name);
    struct stat st;
    if (lstat(full, &st) == 0 && S_ISREG(st.st_mode) && unlink(full) == 0) removed++;
    free(full);
  }
  if (d) closedir(d);
  free(dir);
  return removed;
}

void gk_nn_buf_append(gk_nn_buf *b, const void *bytes, size_t n) {
  if (b->failed) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) {
      if (cap > SIZE_MAX / 2) {
        b->failed = 1;
        return;
      }
      cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (!p) {
      b->failed = 1;
      return;
    }
    b->data = p;
    b->cap = cap;
  }
  if (n) memcpy(b->data + b->len, bytes, n);
  b->len += n;
  b->data[b->len] = 0;
}

void gk_nn_buf_puts(gk_nn_buf *b, const char *s) { gk_nn_buf_append(b, s, strlen(s)); }

void gk_nn_buf_printf(gk_nn_buf *b, const char *fmt, ...) {
  char small[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->failed = 1;
    return;
  }
  if ((size_t)n < sizeof small) {
    gk_nn_buf_append(b, small, (size_t)n);
    return;
  }
  char *big = malloc((size_t)n + 1);
  if (!big) {
    b->failed = 1;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  gk_nn_buf_append(b, big, (size_t)n);
  free(big);
}

void gk_nn_buf_free(gk_nn_buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
  b->failed = 0;
}

// Length of the valid UTF-8 sequence at s (n bytes available), 0 when it is
// not one (overlong forms, surrogates and code points past U+10FFFF refused).
size_t gk_nn_utf8_seq(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  if (c < 0x80) return 1;
  size_t len;
  uint32_t cp, min;
  if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F, min = 0x80;
  else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F, min = 0x800;
  else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07, min = 0x10000;
  else return 0;
  if (n < len) return 0;
  for (size_t k = 1; k < len; k++) {
    if ((s[k] & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (s[k] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

