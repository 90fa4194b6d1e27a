// Whole-file reads and atomic whole-file writes.
#ifndef GK_NN_FILEIO_H
#define GK_NN_FILEIO_H

#include "nn.h"

#include <stddef.h>

// Read the regular file `path` into memory: *data (malloc'd, with one extra
// NUL byte after the contents; free() it) and *size. `what` names the file in
// messages ("data file", "checkpoint"). A FIFO, a device, a directory or a
// file of /proc (0 bytes by its size, yet with contents) is refused without
// waiting on it.
gk_status gk_nn_read_file(const char *path, const char *what, unsigned char **data, size_t *size);

// One piece of a file to write.
typedef struct gk_nn_chunk {
  const void *data;
  size_t size;
} gk_nn_chunk;

// Write the concatenation of `chunks` to `path` atomically:
//   1. create "<path>.tmp-<pid>-<n>" in the same directory (O_EXCL, mode
//      0666 less the umask);
//   2. write every byte, fsync the temporary file, close it;
//   3. rename it over `path` (atomic on POSIX file systems);
//   4. fsync the directory, so the rename itself is durable.
// If any of steps 1-3 fails, the temporary file is removed and `path` is left
// exactly as it was (absent, or the old bytes). A failure of step 4 is
// reported, but `path` already holds the new contents.
gk_status gk_nn_write_atomic(const char *path, const char *what, const gk_nn_chunk *chunks, size_t nchunks);

// Check, before a long run, that gk_nn_write_atomic can write `path`: it is
// not a directory, its directory exists, and a temporary file can be created
// there (it is removed again). The message names `what` ("--checkpoint"),
// the path and the reason.
gk_status gk_nn_check_writable(const char *path, const char *what);

// Whether paths a and b name the same file: one inode when both exist, the
// same name in the same directory when neither does; 0 otherwise.
int gk_nn_same_file(const char *a, const char *b);

// Remove the temporary files "<path>.tmp-<pid>-<n>" that a writer of `path`
// killed before its rename left behind: those whose pid is not this
// process's and belongs to no running process (a pid reused since is taken
// as alive, and the file kept). Returns how many were removed.
int gk_nn_remove_stale_temps(const char *path);

// Test hook: make the next gk_nn_write_atomic fail at one step as if the
// system call had failed (GK_NN_FAULT_WRITE writes half the bytes first).
// The fault applies once and is then cleared.
typedef enum gk_nn_fault {
  GK_NN_FAULT_NONE = 0,
  GK_NN_FAULT_OPEN,
  GK_NN_FAULT_WRITE,
  GK_NN_FAULT_FSYNC,
  GK_NN_FAULT_CLOSE,
  GK_NN_FAULT_RENAME,
  GK_NN_FAULT_COUNT_,
} gk_nn_fault;
void gk_nn_inject_fault(gk_nn_fault fault);

// A growable byte buffer for building a file's contents. An allocation
// failure sets `failed` and makes later appends no-ops; check it once at the
// end. Zero-initialise it; `data` is NUL-terminated when not failed.
typedef struct gk_nn_buf {
  char *data;
  size_t len, cap;
  int failed;
} gk_nn_buf;
void gk_nn_buf_append(gk_nn_buf *b, const void *bytes, size_t n);
void gk_nn_buf_puts(gk_nn_buf *b, const char *s);
void gk_nn_buf_printf(gk_nn_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gk_nn_buf_free(gk_nn_buf *b);

// Length of the valid UTF-8 sequence at s (n >= 1 bytes available), 0 when
// it is not one (overlong forms, surrogates and code points past U+10FFFF are
// refused).
size_t gk_nn_utf8_seq(const unsigned char *s, size_t n);

#endif
