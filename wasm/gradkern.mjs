// gradkern in WebAssembly: an ES module for Node 20 and browsers around
// build/wasm/gradkern.wasm (the library, every op, the trainer). The API is
// declared and documented in gradkern.d.ts; in short:
//
//   import { load } from './gradkern.mjs';
//   const gk = await load();
//   const { y, rstd } = gk.run({ op: 'rmsnorm', direction: 'forward', dtype: 'f32', shape: [4, 8],
//                                norm: { eps: 1e-6 } }, { x, weight });
//   const r = gk.train({ args: ['--steps', '200'], onStep: (p) => console.log(p.step, p.loss) });
//
// As a program: `node wasm/gradkern.mjs train [options]` runs `gradkern train`
// (same options and output) on the files of this machine.
//
// The WebGPU backend's imports come from webgpu.mjs: loaded in a worker with
// options.webgpu (a link to the thread holding the GPUDevice) the backend
// "webgpu" runs there; without it, it is listed as unavailable.
import { webgpuImports, workerLink } from './webgpu.mjs';

const DTYPES = ['f32', 'f64', 'f16', 'bf16', 'i32', 'i64'];
const ARRAYS = { f32: Float32Array, f64: Float64Array, f16: Uint16Array, bf16: Uint16Array, i32: Int32Array,
                 i64: BigInt64Array };
const DTYPE_SAME = -1;
// Names for the enum fields of gk_op_desc (the C enum's values, in order).
const ENUMS = {
  'backend': ['auto', 'ref', 'cpu'],
  'act.approximate': ['erf', 'tanh'],
  'gated.form': ['split', 'two_tensor'],
  'ce.reduction': ['mean', 'sum'],
  'rope.layout': ['bthd', 'bhtd'],
  'rope.pairing': ['half', 'interleaved'],
  'scan.b_layout': ['shared', 'batch', 'grouped'],
  'scan.c_layout': ['shared', 'batch', 'grouped'],
};
const DTYPE_FIELDS = new Set(['param_dtype', 'index_dtype', 'scan.b_dtype', 'scan.c_dtype']);
const MAX_RANK = 8;
const ALIGN = 64;
const isNode = typeof process !== 'undefined' && !!process.versions?.node;

// A call the library rejected: `message` is its gk_last_error(), `status`
// the gk_status code and `statusName` gk_status_string().
export class GradKernError extends Error {
  constructor(message, status, statusName) {
    super(message);
    this.name = 'GradKernError';
    this.status = status;
    this.statusName = statusName;
  }
}

// Whether this host runs WebAssembly SIMD (a module whose one function
// splats an i32 into a v128).
export function hasSimd() {
  return WebAssembly.validate(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 0x60, 0, 1, 0x7b, 3, 2, 1, 0,
                                              10, 8, 1, 6, 0, 0x41, 0, 0xfd, 0x0f, 0x0b]));
}

// Whether this host runs WebAssembly relaxed SIMD (a module whose one
// function is an f32x4.relaxed_madd of its three v128 arguments; Node 20
// validates it only with --experimental-wasm-relaxed-simd).
export function hasRelaxedSimd() {
  return WebAssembly.validate(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 8, 1, 0x60, 3, 0x7b, 0x7b, 0x7b, 1, 0x7b,
                                              3, 2, 1, 0, 10, 13, 1, 11, 0, 0x20, 0, 0x20, 1, 0x20, 2,
                                              0xfd, 0x85, 0x02, 0x0b]));
}

// Why this host cannot run gradkern-threads.wasm's pool, or null if it can:
// it needs shared memory (browsers give it only to cross-origin isolated
// pages), a thread that may block (memory.atomic.wait traps on a browser
// page's own thread) and a way to start threads.
export function threadsUnavailable() {
  if (typeof SharedArrayBuffer === 'undefined' || globalThis.crossOriginIsolated === false)
    return 'no shared memory (a browser page must be served cross-origin isolated: COOP/COEP headers)';
  if (isNode) return null;
  if (typeof WorkerGlobalScope === 'undefined' || !(globalThis instanceof WorkerGlobalScope))
    return "a browser page's own thread cannot wait for other threads (run gradkern in a Worker)";
  if (typeof Worker === 'undefined') return 'this worker cannot start workers';
  return null;
}

// The number of processors this host reports.
async function hostProcessors() {
  if (isNode) return (await import('node:os')).availableParallelism();
  return globalThis.navigator?.hardwareConcurrency ?? 1;
}

const MODULE_FILES = { simd: 'gradkern.wasm', plain: 'gradkern-plain.wasm', threads: 'gradkern-threads.wasm',
                       relaxed: 'gradkern-relaxed.wasm', 'relaxed-threads': 'gradkern-relaxed-threads.wasm' };

async function compileModule(source, build) {  // source: options.module
  if (source instanceof WebAssembly.Module) return source;
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) return WebAssembly.compile(source);
  let url = new URL(`../build/wasm/${MODULE_FILES[build]}`, import.meta.url);
  if (source instanceof URL) url = source;
  else if (source && isNode && !/^[a-z][a-z0-9+.-]*:/i.test(source)) url = (await import('node:url')).pathToFileURL(source);
  else if (source) url = new URL(String(source), globalThis.location?.href);
  if (url.protocol === 'file:') {
    const { readFile } = await import('node:fs/promises');
    return WebAssembly.compile(await readFile(url));
  }
  const response = await fetch(url);
  if (!response.ok) throw new Error(`gradkern: fetching ${url}: HTTP ${response.status}`);
  return WebAssembly.compile(await response.arrayBuffer());
}

// ---------------------------------------------------------------- WASI

// The WASI functions gradkern.wasm imports (wasi_snapshot_preview1), over a
// file system object: MemoryFiles (in memory, the same in Node and browsers:
// the API's default) or HostFiles (this machine's files through node:fs: the
// program). One preopened directory, fd 3, is "/"; the module's working
// directory starts as "/".
const ERRNO = { SUCCESS: 0, ACCES: 2, BADF: 8, EXIST: 20, INVAL: 28, IO: 29, ISDIR: 31, NOENT: 44, NOSPC: 51,
                NOTDIR: 54, NOTEMPTY: 55, PERM: 63, ROFS: 69, SPIPE: 70 };
const FILETYPE = { UNKNOWN: 0, CHARACTER_DEVICE: 2, DIRECTORY: 3, REGULAR_FILE: 4, SYMBOLIC_LINK: 7 };
const OFLAGS = { CREAT: 1, DIRECTORY: 2, EXCL: 4, TRUNC: 8 };
const RIGHT_FD_WRITE = 1n << 6n;

class ProcExit extends Error {
  constructor(code) {
    super(`exit ${code}`);
    this.code = code;
  }
}

// A failed file operation: its WASI errno.
class WasiError extends Error {
  constructor(errno) {
    super(`errno ${errno}`);
    this.errno = errno;
  }
}

function normalizePath(path) {
  const parts = [];
  for (const p of path.split('/')) {
    if (p === '' || p === '.') continue;
    if (p === '..') parts.pop();
    else parts.push(p);
  }
  return '/' + parts.join('/');
}

// Files in memory: a map of absolute path -> bytes; the directories are "/",
// those named by a file's path, and those made with mkdir().
class MemoryFiles {
  constructor() {
    this.files = new Map();
    this.dirs = new Set(['/']);
    this.inodes = new Map(); // path -> inode number
  }

  // A distinct inode number per path (there are no links), so that a program
  // comparing st_dev and st_ino (gk_nn_same_file) tells two files apart.
  identity(h) {
    if (!this.inodes.has(h.path)) this.inodes.set(h.path, this.inodes.size + 1);
    return { dev: 0, ino: this.inodes.get(h.path) };
  }

  isDir(path) {
    if (this.dirs.has(path)) return true;
    for (const name of this.files.keys()) if (name.startsWith(path + '/')) return true;
    return false;
  }

  put(path, bytes) {
    const p = normalizePath(path);
    this.files.set(p, new Uint8Array(bytes));
  }

  stat(path) {
    if (this.isDir(path)) return { type: FILETYPE.DIRECTORY, size: 0, ...this.identity({ path }) };
    if (this.files.has(path)) return { type: FILETYPE.REGULAR_FILE, size: this.files.get(path).length, ...this.identity({ path }) };
    throw new WasiError(ERRNO.NOENT);
  }

  // A handle: { path, dir } (files are read and written by path).
  open(path, oflags) {
    if (this.isDir(path)) {
      if (oflags & OFLAGS.EXCL) throw new WasiError(ERRNO.EXIST);
      if (oflags & (OFLAGS.CREAT | OFLAGS.TRUNC)) throw new WasiError(ERRNO.ISDIR);
      return { path, dir: true };
    }
    const exists = this.files.has(path);
    if (oflags & OFLAGS.DIRECTORY) throw new WasiError(exists ? ERRNO.NOTDIR : ERRNO.NOENT);
    if (!exists) {
      if (!(oflags & OFLAGS.CREAT)) throw new WasiError(ERRNO.NOENT);
      const parent = path.slice(0, path.lastIndexOf('/')) || '/';
      if (!this.isDir(parent)) throw new WasiError(this.files.has(parent) ? ERRNO.NOTDIR : ERRNO.NOENT);
      this.files.set(path, new Uint8Array(0));
    } else if (oflags & OFLAGS.EXCL) {
      throw new WasiError(ERRNO.EXIST);
    } else if (oflags & OFLAGS.TRUNC) {
      this.files.set(path, new Uint8Array(0));
    }
    return { path, dir: false };
  }

  size(h) { return this.files.get(h.path).length; }

  read(h, into, pos) {
    const part = this.files.get(h.path).subarray(pos, pos + into.length);
    into.set(part);
    return part.length;
  }

  write(h, data, pos) {
    const old = this.files.get(h.path);
    const grown = old.length >= pos + data.length ? old : new Uint8Array(pos + data.length);
    if (grown !== old) grown.set(old);
    grown.set(data, pos);
    this.files.set(h.path, grown);
  }

  close() {}
  sync() {}

  list(path) {
    const prefix = path === '/' ? '/' : path + '/';
    const names = new Set();
    for (const name of [...this.files.keys(), ...this.dirs])
      if (name.startsWith(prefix) && name !== prefix) names.add(name.slice(prefix.length).split('/')[0]);
    return [...names].sort().map((name) => ({ name, type: this.stat(prefix + name).type }));
  }

  rename(from, to) {
    if (!this.files.has(from)) throw new WasiError(this.isDir(from) ? ERRNO.ISDIR : ERRNO.NOENT);
    if (this.isDir(to)) throw new WasiError(ERRNO.ISDIR);
    this.files.set(to, this.files.get(from));
    this.files.delete(from);
  }

  unlink(path) {
    if (!this.files.has(path)) throw new WasiError(this.isDir(path) ? ERRNO.ISDIR : ERRNO.NOENT);
    this.files.delete(path);
  }
}

// This machine's files, through node:fs (synchronous calls).
class HostFiles {
  constructor(fs) { this.fs = fs; }

  static errno(e) {
    const map = { ENOENT: ERRNO.NOENT, EEXIST: ERRNO.EXIST, EISDIR: ERRNO.ISDIR, ENOTDIR: ERRNO.NOTDIR,
                  EACCES: ERRNO.ACCES, EPERM: ERRNO.PERM, EINVAL: ERRNO.INVAL, ENOSPC: ERRNO.NOSPC,
                  ENOTEMPTY: ERRNO.NOTEMPTY, EROFS: ERRNO.ROFS, EBADF: ERRNO.BADF };
    return new WasiError(map[e.code] ?? ERRNO.IO);
  }

  call(fn) {
    try {
      return fn();
    } catch (e) {
      throw e instanceof WasiError ? e : HostFiles.errno(e);
    }
  }

  static type(st) {
    return st.isDirectory() ? FILETYPE.DIRECTORY : st.isFile() ? FILETYPE.REGULAR_FILE
      : st.isSymbolicLink() ? FILETYPE.SYMBOLIC_LINK : st.isCharacterDevice() ? FILETYPE.CHARACTER_DEVICE
      : FILETYPE.UNKNOWN;  // FIFOs and sockets: WASI has no file type for a FIFO
  }

  stat(path, follow = true) {
    return this.call(() => {
      const st = follow ? this.fs.statSync(path) : this.fs.lstatSync(path);
      return { type: HostFiles.type(st), size: st.size, dev: st.dev, ino: st.ino };
    });
  }

  // The device and inode numbers of an open handle.
  identity(h) {
    return this.call(() => {
      const st = h.dir ? this.fs.statSync(h.path) : this.fs.fstatSync(h.fd);
      return { dev: st.dev, ino: st.ino };
    });
  }

  open(path, oflags, write) {
    return this.call(() => {
      const c = this.fs.constants;
      if (!(oflags & OFLAGS.CREAT)) {
        const st = this.fs.statSync(path);
        if (st.isDirectory()) {
          if (oflags & OFLAGS.TRUNC) throw new WasiError(ERRNO.ISDIR);
          return { path, dir: true };
        }
        if (oflags & OFLAGS.DIRECTORY) throw new WasiError(ERRNO.NOTDIR);
      }
      let flags = write ? c.O_RDWR : c.O_RDONLY;
      if (oflags & OFLAGS.CREAT) flags |= c.O_CREAT;
      if (oflags & OFLAGS.EXCL) flags |= c.O_EXCL;
      if (oflags & OFLAGS.TRUNC) flags |= c.O_TRUNC;
      return { path, dir: false, fd: this.fs.openSync(path, flags | c.O_NONBLOCK, 0o666) };
    });
  }

  size(h) { return this.call(() => this.fs.fstatSync(h.fd).size); }
  read(h, into, pos) { return this.call(() => this.fs.readSync(h.fd, into, 0, into.length, pos)); }
  write(h, data, pos) { this.call(() => this.fs.writeSync(h.fd, data, 0, data.length, pos)); }
  close(h) { if (!h.dir) this.call(() => this.fs.closeSync(h.fd)); }
  sync(h) { if (!h.dir) this.call(() => this.fs.fsyncSync(h.fd)); }

  list(path) {
    return this.call(() => this.fs.readdirSync(path, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))
      .map((d) => ({ name: d.name, type: HostFiles.type(d) })));
  }

  rename(from, to) { this.call(() => this.fs.renameSync(from, to)); }
  unlink(path) { this.call(() => this.fs.unlinkSync(path)); }
}

class Wasi {
  constructor(files) {
    this.files = files;
    this.env = {};
    this.fds = new Map();     // fd -> { handle, pos } (3: the preopened "/")
    this.nextFd = 4;
    this.output = null;       // (stream, bytes) for fds 1 and 2
    this.stdoutIsTerminal = false;
    this.memory = null;
  }

  view() { return new DataView(this.memory.buffer); }
  bytes(ptr, len) { return new Uint8Array(this.memory.buffer, ptr, len); }

  handle(fd) {
    if (fd === 3) return { handle: { path: '/', dir: true }, pos: 0 };
    const f = this.fds.get(fd);
    if (!f) throw new WasiError(ERRNO.BADF);
    return f;
  }

  resolve(dirFd, ptr, len) {
    const dir = this.handle(dirFd).handle;
    if (!dir.dir) throw new WasiError(ERRNO.NOTDIR);
    return normalizePath(dir.path + '/' + new TextDecoder().decode(this.bytes(ptr, len).slice()));
  }

  writeFilestat(ptr, { type, size, dev = 0, ino = 0 }) {
    const v = this.view();
    for (let i = 0; i < 64; i += 8) v.setBigUint64(ptr + i, 0n, true);
    v.setBigUint64(ptr, BigInt(dev), true);
    v.setBigUint64(ptr + 8, BigInt(ino), true);
    v.setUint8(ptr + 16, type);
    v.setBigUint64(ptr + 24, 1n, true);
    v.setBigUint64(ptr + 32, BigInt(size), true);
  }

  iovecs(iovs, n) {
    const v = this.view(), list = [];
    for (let i = 0; i < n; i++) list.push(this.bytes(v.getUint32(iovs + 8 * i, true), v.getUint32(iovs + 8 * i + 4, true)));
    return list;
  }

  imports() {
    const w = this;
    // Every call answers an errno; a file system's failure is its WasiError.
    const call = (fn) => (...args) => {
      try {
        fn(...args);
        return ERRNO.SUCCESS;
      } catch (e) {
        if (e instanceof WasiError) return e.errno;
        throw e;
      }
    };
    const environ = () => Object.entries(w.env).map(([k, v]) => new TextEncoder().encode(`${k}=${v}\0`));
    return {
      environ_sizes_get: call((countPtr, sizePtr) => {
        const entries = environ();
        w.view().setUint32(countPtr, entries.length, true);
        w.view().setUint32(sizePtr, entries.reduce((n, e) => n + e.length, 0), true);
      }),
      environ_get: call((ptrs, buf) => {
        for (const e of environ()) {
          w.view().setUint32(ptrs, buf, true);
          w.bytes(buf, e.length).set(e);
          ptrs += 4;
          buf += e.length;
        }
      }),
      clock_time_get: call((id, precision, out) => {
        const ms = id === 0 ? Date.now() : (globalThis.performance?.now() ?? Date.now());
        w.view().setBigUint64(out, BigInt(Math.round(ms * 1e6)), true);
      }),
      fd_write: call((fd, iovs, n, written) => {
        const parts = w.iovecs(iovs, n);
        const total = parts.reduce((s, p) => s + p.length, 0);
        const data = new Uint8Array(total);
        parts.reduce((at, p) => (data.set(p, at), at + p.length), 0);
        if (fd === 1 || fd === 2) {
          if (w.output) w.output(fd === 1 ? 'stdout' : 'stderr', data);
        } else {
          const f = w.handle(fd);
          if (f.handle.dir) throw new WasiError(ERRNO.BADF);
          w.files.write(f.handle, data, f.pos);
          f.pos += total;
        }
        w.view().setUint32(written, total, true);
      }),
      fd_read: call((fd, iovs, n, readPtr) => {
        let total = 0;
        if (fd !== 0) {
          const f = w.handle(fd);
          if (f.handle.dir) throw new WasiError(ERRNO.ISDIR);
          for (const into of w.iovecs(iovs, n)) {
            const got = w.files.read(f.handle, into, f.pos);
            f.pos += got;
            total += got;
            if (got < into.length) break;
          }
        }
        w.view().setUint32(readPtr, total, true);
      }),
      fd_seek: call((fd, offset, whence, out) => {
        if (fd <= 2) throw new WasiError(ERRNO.SPIPE);
        const f = w.handle(fd);
        const pos = Number(offset) + [0, f.pos, f.handle.dir ? 0 : w.files.size(f.handle)][whence];
        if (!(pos >= 0)) throw new WasiError(ERRNO.INVAL);
        f.pos = pos;
        w.view().setBigUint64(out, BigInt(pos), true);
      }),
      fd_close: call((fd) => {
        w.files.close(w.handle(fd).handle);
        w.fds.delete(fd);
      }),
      fd_sync: call((fd) => w.files.sync(w.handle(fd).handle)),
      fd_fdstat_get: call((fd, out) => {
        // A terminal is a character device without seek/tell rights (isatty).
        const terminal = fd === 1 && w.stdoutIsTerminal;
        const type = fd <= 2 ? (terminal ? FILETYPE.CHARACTER_DEVICE : FILETYPE.UNKNOWN)
          : w.handle(fd).handle.dir ? FILETYPE.DIRECTORY : FILETYPE.REGULAR_FILE;
        const v = w.view();
        v.setUint8(out, type);
        v.setUint16(out + 2, 0, true);
        v.setBigUint64(out + 8, terminal ? RIGHT_FD_WRITE : 0x1fffffffn, true);
        v.setBigUint64(out + 16, 0x1fffffffn, true);
      }),
      fd_filestat_get: call((fd, out) => {
        if (fd <= 2) return w.writeFilestat(out, { type: FILETYPE.UNKNOWN, size: 0 });
        const f = w.handle(fd);
        w.writeFilestat(out, { ...w.files.identity(f.handle), ...(f.handle.dir ? { type: FILETYPE.DIRECTORY, size: 0 }
          : { type: FILETYPE.REGULAR_FILE, size: w.files.size(f.handle) }) });
      }),
      fd_prestat_get: call((fd, out) => {
        if (fd !== 3) throw new WasiError(ERRNO.BADF);
        w.view().setUint32(out, 0, true);         // a directory
        w.view().setUint32(out + 4, 1, true);     // its name: "/"
      }),
      fd_prestat_dir_name: call((fd, ptr, len) => {
        if (fd !== 3) throw new WasiError(ERRNO.BADF);
        if (len >= 1) w.bytes(ptr, 1)[0] = 0x2f;
      }),
      fd_readdir: call((fd, buf, bufLen, cookie, usedPtr) => {
        const dir = w.handle(fd).handle;
        if (!dir.dir) throw new WasiError(ERRNO.NOTDIR);
        const list = w.files.list(dir.path);
        let used = 0;
        for (let i = Number(cookie); i < list.length && used < bufLen; i++) {
          const name = new TextEncoder().encode(list[i].name);
          const entry = new Uint8Array(24 + name.length), ev = new DataView(entry.buffer);
          ev.setBigUint64(0, BigInt(i + 1), true);   // the next entry's cookie
          ev.setBigUint64(8, BigInt(i + 1), true);
          ev.setUint32(16, name.length, true);
          ev.setUint8(20, list[i].type);
          entry.set(name, 24);
          const part = entry.subarray(0, Math.min(entry.length, bufLen - used));
          w.bytes(buf + used, part.length).set(part);
          used += part.length;
        }
        w.view().setUint32(usedPtr, used, true);
      }),
      path_open: call((dirFd, dirflags, ptr, len, oflags, rightsBase, rightsInh, fdflags, fdOut) => {
        const handle = w.files.open(w.resolve(dirFd, ptr, len), oflags, (BigInt(rightsBase) & RIGHT_FD_WRITE) !== 0n);
        const fd = w.nextFd++;
        w.fds.set(fd, { handle, pos: 0 });
        w.view().setUint32(fdOut, fd, true);
      }),
      path_filestat_get: call((dirFd, flags, ptr, len, out) => {
        w.writeFilestat(out, w.files.stat(w.resolve(dirFd, ptr, len), (flags & 1) !== 0));
      }),
      path_rename: call((fd, ptr, len, newFd, newPtr, newLen) => {
        w.files.rename(w.resolve(fd, ptr, len), w.resolve(newFd, newPtr, newLen));
      }),
      path_unlink_file: call((fd, ptr, len) => w.files.unlink(w.resolve(fd, ptr, len))),
      proc_exit: (code) => {
        throw new ProcExit(code);
      },
    };
  }
}

// ---------------------------------------------------------------- the library

// gradkern.wasm, instantiated: see gradkern.d.ts.
class GradKern {
  constructor(instance, memory, isThreads, wasi, webgpu) {
    this.exports = instance.exports;
    this.webgpu = webgpu;        // the gk_webgpu imports (webgpu.mjs)
    this.memory = memory;
    this.build = buildOf(isThreads, this.cString(instance.exports.gkjs_isa()));
    this.simd = this.build !== 'plain';
    this.wasi = wasi;
    this.trainHooks = null;
    const e = this.exports;
    this.version = this.cString(e.gk_version());
    this.ops = [];
    for (let i = 0; ; i++) {
      const name = this.cString(e.gk_op_name(i));
      if (name === '?') break;
      this.ops.push(name);
    }
    this.statusNames = [];   // gk_status_string of 0, 1, ... up to the first unknown one
    const unknown = this.cString(e.gk_status_string(-1));
    for (let i = 0; this.cString(e.gk_status_string(i)) !== unknown; i++)
      this.statusNames.push(this.cString(e.gk_status_string(i)));
    this.argNames = [];
    for (let i = 0; ; i++) {
      const name = this.cString(e.gk_arg_name(i));
      if (name === '?') break;
      this.argNames.push(name);
    }
  }

  cString(ptr) {  // copied first: TextDecoder refuses views of shared memory
    const bytes = new Uint8Array(this.memory.buffer, ptr);
    return new TextDecoder().decode(bytes.slice(0, bytes.indexOf(0)));
  }

  // The library's last error as a GradKernError with `status`.
  lastError(status) {
    const message = this.cString(this.exports.gk_last_error());
    return new GradKernError(message || this.statusNames[status], status, this.statusNames[status]);
  }

  alloc(bytes) {
    const ptr = this.exports.malloc(Math.max(1, bytes));
    if (!ptr) throw new GradKernError(`gradkern.wasm: out of memory allocating ${bytes} bytes`, 14, 'out of memory');
    return ptr;
  }

  withString(s, fn) {
    const b = new TextEncoder().encode(s + '\0');
    const ptr = this.alloc(b.length);
    new Uint8Array(this.memory.buffer, ptr, b.length).set(b);
    try {
      return fn(ptr);
    } finally {
      this.exports.free(ptr);
    }
  }

  withShape(shape, fn) {
    const ptr = this.alloc(8 * MAX_RANK);
    const v = new BigInt64Array(this.memory.buffer, ptr, MAX_RANK);
    shape.forEach((n, i) => { v[i] = BigInt(n); });
    try {
      return fn(ptr);
    } finally {
      this.exports.free(ptr);
    }
  }

  static dtypeIndex(name, what) {
    const i = DTYPES.indexOf(name);
    if (i < 0) throw new TypeError(`${what} = ${JSON.stringify(name)} is not one of ${DTYPES.join(', ')}`);
    return i;
  }

  // A gk_op_desc in the module's memory from a JavaScript description.
  makeDesc(desc) {
    const e = this.exports;
    const op = this.ops.indexOf(desc.op);
    if (op < 0) throw new TypeError(`desc.op = ${JSON.stringify(desc.op)} is not one of ${this.ops.join(', ')}`);
    const dir = ['forward', 'backward'].indexOf(desc.direction ?? 'forward');
    if (dir < 0) throw new TypeError(`desc.direction = ${JSON.stringify(desc.direction)} is not forward or backward`);
    const dtype = GradKern.dtypeIndex(desc.dtype ?? 'f32', 'desc.dtype');
    const shape = desc.shape ?? [];
    if (!Array.isArray(shape) || shape.length > MAX_RANK)
      throw new TypeError(`desc.shape must be an array of at most ${MAX_RANK} sizes`);
    const d = this.alloc(this.withString('gk_op_desc', (name) => e.gk_struct_size(name)));
    try {
      const status = this.withShape(shape, (s) => e.gk_op_desc_init(d, op, dir, dtype, shape.length, s));
      if (status !== 0) throw this.lastError(status);
      for (const [field, value] of Object.entries(GradKern.flatten(desc))) this.setField(d, field, value);
    } catch (err) {
      e.free(d);
      throw err;
    }
    return d;
  }

  // { norm: { eps: 1e-6 }, accumulate: 1 } -> { 'norm.eps': 1e-6, accumulate: 1 }
  static flatten(desc) {
    const out = {};
    for (const [k, v] of Object.entries(desc)) {
      if (['op', 'direction', 'dtype', 'shape'].includes(k)) continue;
      if (v && typeof v === 'object' && !Array.isArray(v)) {
        for (const [k2, v2] of Object.entries(v)) out[`${k}.${k2}`] = v2;
      } else {
        out[k] = v;
      }
    }
    return out;
  }

  setField(d, field, value) {
    const e = this.exports;
    let status;
    if (Array.isArray(value)) {
      status = this.withString(field, (f) => this.withShape(value, (s) => e.gkjs_desc_set_shape(d, f, value.length, s)));
    } else {
      let number = value;
      if (typeof value === 'string') {
        if (DTYPE_FIELDS.has(field)) number = value === 'same' ? DTYPE_SAME : GradKern.dtypeIndex(value, `desc.${field}`);
        else if (ENUMS[field] && ENUMS[field].includes(value)) number = ENUMS[field].indexOf(value);
        else throw new TypeError(`desc.${field} = ${JSON.stringify(value)} is not one of ${(ENUMS[field] ?? []).join(', ')}`);
      } else if (typeof value === 'boolean') {
        number = value ? 1 : 0;
      } else if (typeof value !== 'number') {
        throw new TypeError(`desc.${field} must be a number, boolean or name`);
      }
      status = this.withString(field, (f) => e.gkjs_desc_set(d, f, number));
    }
    if (status !== 0) throw this.lastError(status);
  }

  // A plan for `desc` (see gradkern.d.ts): kernel chosen, arguments known.
  plan(desc) {
    const e = this.exports;
    const d = this.makeDesc(desc);
    const out = this.alloc(4);
    try {
      const status = e.gk_plan_create(d, out);
      if (status !== 0) throw this.lastError(status);
      return new Plan(this, new Uint32Array(this.memory.buffer, out, 1)[0], `${desc.op} ${desc.direction ?? 'forward'}`);
    } finally {
      e.free(out);
      e.free(d);
    }
  }

  // Plan, run once and destroy.
  run(desc, tensors) {
    const plan = this.plan(desc);
    try {
      return plan.run(tensors);
    } finally {
      plan.destroy();
    }
  }

  // The registered backends (see gradkern.d.ts).
  backends() {
    const e = this.exports, list = [];
    const out = this.alloc(12);
    try {
      for (let i = 0; ; i++) {
        const name = e.gkjs_backend(i, out, out + 4);
        if (!name) break;
        const [available, reason, device] = new Uint32Array(this.memory.buffer, out, 3);
        list.push({ name: this.cString(name), available: available === 1, reason: this.cString(reason),
                    device: this.cString(device) });
      }
    } finally {
      e.free(out);
    }
    return list;
  }

  // Per-dispatch GPU times of the WebGPU backend (see gradkern.d.ts).
  webgpuTiming(on) { return this.webgpu.jsTiming(on); }
  webgpuKernelTimes() { return this.webgpu.jsKernelTimes(); }

  setNumThreads(n) {
    const status = this.exports.gk_set_num_threads(n);
    if (status !== 0) throw this.lastError(status);
  }

  getNumThreads() { return this.exports.gk_get_num_threads(); }

  // f32 values <-> f16/bf16 bit patterns, rounded to nearest even as the library stores them.
  toHalf(values, dtype) {
    const f = dtype === 'bf16' ? this.exports.gk_f32_to_bf16 : this.exports.gk_f32_to_f16;
    return Uint16Array.from(values, (x) => f(x));
  }

  fromHalf(bits, dtype) {
    const f = dtype === 'bf16' ? this.exports.gk_bf16_to_f32 : this.exports.gk_f16_to_f32;
    return Float32Array.from(bits, (h) => f(h));
  }

  // `gradkern train` in this module (see gradkern.d.ts).
  train(options = {}) { return this.command('train', this.exports.gkjs_train, options); }

  // `gradkern sample` in this module (see gradkern.d.ts).
  sample(options = {}) { return this.command('sample', this.exports.gkjs_sample, options); }

  // One of the program's commands (train, sample): options.files put in the
  // module's file system, argv built in its memory, entry(argc, argv) run,
  // the output gathered (and handed to options.onOutput as it comes), and
  // every file returned.
  command(name, entry, options) {
    const e = this.exports, w = this.wasi;
    const args = options.args ?? [];
    const out = { stdout: [], stderr: [] };
    const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() };
    const inMemory = w.files instanceof MemoryFiles;
    if (inMemory) for (const [path, bytes] of Object.entries(options.files ?? {})) w.files.put(path, bytes);
    w.env = { ...(options.env ?? {}) };
    w.output = (stream, bytes) => {
      const text = decoders[stream].decode(bytes, { stream: true });
      out[stream].push(text);
      if (options.onOutput) options.onOutput(text, stream);
    };
    this.trainHooks = options;
    const strings = [name, ...args].map((a) => new TextEncoder().encode(String(a) + '\0'));
    const argv = this.alloc(4 * strings.length);
    const ptrs = strings.map((s) => {
      const p = this.alloc(s.length);
      new Uint8Array(this.memory.buffer, p, s.length).set(s);
      return p;
    });
    new Uint32Array(this.memory.buffer, argv, strings.length).set(ptrs);
    let exitCode;
    try {
      exitCode = entry(args.length, argv + 4);
    } catch (err) {
      if (!(err instanceof ProcExit)) throw err;
      exitCode = err.code;
    } finally {
      ptrs.forEach((p) => e.free(p));
      e.free(argv);
      this.trainHooks = null;
      w.output = null;
    }
    for (const stream of ['stdout', 'stderr']) out[stream].push(decoders[stream].decode());
    const files = {};
    if (inMemory) for (const [path, bytes] of w.files.files) files[path] = bytes;
    return { exitCode, stdout: out.stdout.join(''), stderr: out.stderr.join(''), files };
  }

  // The "gradkern" imports: the trainer's progress, to the hooks of train().
  static trainImports(self) {
    return {
      train_step: (step, steps, loss, lr) => (self.gk?.trainHooks?.onStep?.({ step, steps, loss, lr }) ? 1 : 0),
      train_eval: (step, loss, accuracy) => { self.gk?.trainHooks?.onEval?.({ step, loss, accuracy }); },
    };
  }
}

// One plan: see gradkern.d.ts.
class Plan {
  constructor(gk, ptr, what) {
    this.gk = gk;
    this.ptr = ptr;
    this.what = what;
    const e = gk.exports;
    this.kernel = gk.cString(e.gkjs_plan_kernel(ptr));
    this.isa = gk.cString(e.gkjs_plan_isa(ptr));
    this.workspaceBytes = e.gkjs_plan_workspace(ptr);
    this.args = [];
    const shapePtr = gk.alloc(8 * MAX_RANK), rolePtr = gk.alloc(8);
    try {
      for (let kind = 0; kind < gk.argNames.length; kind++) {
        const rank = e.gkjs_plan_arg(ptr, kind, shapePtr, rolePtr);
        if (rank === -2) throw gk.lastError(2);
        if (rank < 0) continue;
        const shape = Array.from(new BigInt64Array(gk.memory.buffer, shapePtr, rank), Number);
        const role = new Int32Array(gk.memory.buffer, rolePtr, 2);
        this.args.push({ name: gk.argNames[kind], kind, shape, dtype: DTYPES[role[0]], output: role[1] === 1,
                         numel: shape.reduce((a, b) => a * b, 1) });
      }
    } finally {
      e.free(shapePtr);
      e.free(rolePtr);
    }
  }

  // Run on typed arrays: every input, and any output given (its values are
  // read too: accumulation). Returns every output, as new arrays (or the ones given).
  run(tensors) {
    if (!this.ptr) throw new Error(`${this.what}: the plan was destroyed`);
    const gk = this.gk, e = gk.exports;
    for (const name of Object.keys(tensors))
      if (!this.args.some((a) => a.name === name))
        throw new TypeError(`${this.what}: argument "${name}" is not one the plan takes (${this.args.map((a) => a.name).join(', ')})`);
    let offset = 0;
    const layout = this.args.map((a) => {
      const given = tensors[a.name];
      const Type = ARRAYS[a.dtype];
      if (given === undefined && !a.output)
        throw new TypeError(`${this.what}: input "${a.name}" (${a.dtype}, shape [${a.shape}]) is missing`);
      if (given !== undefined && !(given instanceof Type && given.length === a.numel))
        throw new TypeError(`${this.what}: "${a.name}" must be a ${Type.name} of ${a.numel} elements ` +
                            `(${a.dtype}, shape [${a.shape}]); got ${given?.constructor?.name} of ${given?.length}`);
      const at = offset;
      offset += Math.ceil((a.numel * Type.BYTES_PER_ELEMENT) / ALIGN) * ALIGN || ALIGN;
      return { a, Type, given, at };
    });
    const wsAt = offset;
    offset += Math.ceil(this.workspaceBytes / ALIGN) * ALIGN;
    const base = gk.alloc(offset + ALIGN);
    const aligned = Math.ceil(base / ALIGN) * ALIGN;
    const args = e.gkjs_args_new(layout.length);
    try {
      for (const [i, { a, Type, given, at }] of layout.entries()) {
        const mem = new Type(gk.memory.buffer, aligned + at, a.numel);
        if (given) mem.set(given);
        else mem.fill(Type === BigInt64Array ? 0n : 0);
        const s = gk.withShape(a.shape, (sp) => e.gkjs_arg_set(args, i, a.kind, aligned + at, DTYPES.indexOf(a.dtype),
                                                               a.shape.length, sp));
        if (s !== 0) throw gk.lastError(s);
      }
      const status = e.gk_plan_run(this.ptr, args, layout.length, this.workspaceBytes ? aligned + wsAt : 0,
                                   this.workspaceBytes);
      if (status !== 0) throw gk.lastError(status);
      const out = {};
      for (const { a, Type, given, at } of layout) {
        if (!a.output) continue;
        const mem = new Type(gk.memory.buffer, aligned + at, a.numel);
        out[a.name] = given ? (given.set(mem), given) : mem.slice();
      }
      return out;
    } finally {
      e.free(args);
      e.free(base);
    }
  }

  destroy() {
    if (this.ptr) this.gk.exports.gk_plan_destroy(this.ptr);
    this.ptr = 0;
  }
}

// gradkern-threads.wasm's memory: shared, of the sizes the module declares
// (wasm/CMakeLists.txt: 16 MiB at first, at most 2 GiB; in 64 KiB pages).
const THREADS_MEMORY = { initial: 256, maximum: 32768, shared: true };
// Each pool thread's stack: the main thread's size (wasm/CMakeLists.txt).
const THREAD_STACK_BYTES = 8 << 20;

// The module load() picks when none is given: the build with threads where
// the host can run them (threadsUnavailable) and has more than one
// processor, unless one thread is asked for; else the SIMD build, or the
// plain one on hosts without WebAssembly SIMD. Each SIMD build in its
// relaxed-SIMD version where relaxed is true.
async function defaultBuild(simd, relaxed, threads) {
  if (!simd) return 'plain';
  const withThreads = threads !== 1 && !threadsUnavailable() && (threads > 1 || (await hostProcessors()) > 1);
  if (relaxed) return withThreads ? 'relaxed-threads' : 'relaxed';
  return withThreads ? 'threads' : 'simd';
}

// The build of an instance, from its imports and the CPU backend's level.
function buildOf(isThreads, isa) {
  if (isa === 'scalar') return 'plain';
  if (isa === 'simd128-relaxed') return isThreads ? 'relaxed-threads' : 'relaxed';
  return isThreads ? 'threads' : 'simd';
}

// Start the pool's threads (wasm/thread.mjs) for a threads-build instance:
// each gets an 8 MiB stack and a thread-local storage block from the
// module's malloc, and counts itself in the module's pool once it runs.
// Resolves when all have started; Node's threads do not keep the process
// alive.
async function startThreads(module, memory, exports, count) {
  const tlsSize = exports.__tls_size.value, tlsAlign = Math.max(exports.__tls_align.value, 16);
  const url = new URL('./thread.mjs', import.meta.url);
  const starts = [];
  for (let i = 0; i < count; i++) {
    const stack = exports.malloc(THREAD_STACK_BYTES), tls = exports.malloc(tlsSize + tlsAlign);
    if (!stack || !tls) throw new GradKernError('gradkern.wasm: out of memory starting the thread pool', 14, 'out of memory');
    const data = { module, memory, stackTop: Math.floor((stack + THREAD_STACK_BYTES) / 16) * 16,
                   tls: Math.ceil(tls / tlsAlign) * tlsAlign };
    let worker;
    if (isNode) {
      const { Worker } = await import('node:worker_threads');
      worker = new Worker(url, { workerData: data });
    } else {
      worker = new Worker(url, { type: 'module' });
      worker.postMessage(data);
    }
    starts.push(new Promise((resolve, reject) => {
      const onMessage = (m) => {
        const msg = isNode ? m : m.data;
        if (msg?.gkThreadReady) {
          if (isNode) worker.unref();  // a running pool does not keep Node's process alive
          resolve();
        }
        else if (msg?.gkThreadError) reject(new Error(`gradkern: a pool thread failed to start: ${msg.gkThreadError}`));
      };
      const onError = (e) => reject(new Error(`gradkern: a pool thread failed to start: ${e?.message ?? e}`));
      if (isNode) worker.on('message', onMessage).on('error', onError);
      else Object.assign(worker, { onmessage: onMessage, onerror: onError });
    }));
  }
  await Promise.all(starts);
  while (exports.gk_get_num_threads() < count + 1) await new Promise((r) => setTimeout(r, 1));
}

// Load gradkern.wasm, gradkern-plain.wasm, gradkern-threads.wasm or their
// relaxed-SIMD versions (see gradkern.d.ts for the options).
export async function load(options = {}) {
  const asked = options.threads;
  if (asked !== undefined && (!Number.isInteger(asked) || asked < 1 || asked > 1024))
    throw new RangeError(`gradkern: threads = ${asked} is not an integer in 1..1024`);
  const simd = options.simd ?? hasSimd();
  const relaxed = simd && (options.relaxed ?? hasRelaxedSimd());
  const module = await compileModule(options.module, await defaultBuild(simd, relaxed, asked));
  const isThreads = WebAssembly.Module.imports(module).some((i) => i.kind === 'memory');
  const why = isThreads ? threadsUnavailable() : 'the module is not gradkern-threads.wasm';
  if (asked > 1 && why) throw new Error(`gradkern: threads = ${asked}: ${!simd ? 'no WebAssembly SIMD here' : why}`);
  const threads = isThreads && !why ? asked ?? Math.min(await hostProcessors(), 1024) : 1;
  const self = { gk: null };
  if (options.files === 'host' && !isNode) throw new Error("gradkern: files: 'host' needs Node");
  const wasi = new Wasi(options.files === 'host' ? new HostFiles(await import('node:fs')) : new MemoryFiles());
  const memory = isThreads ? new WebAssembly.Memory(THREADS_MEMORY) : null;
  const webgpu = webgpuImports(() => wasi.memory, options.webgpu ?? null,
                               'no WebGPU device was linked (load({ webgpu }) in a worker, see wasm/webgpu.mjs)');
  const imports = { wasi_snapshot_preview1: wasi.imports(), gradkern: GradKern.trainImports(self), gk_webgpu: webgpu,
                    ...(isThreads ? { env: { memory } } : {}) };
  const instance = await WebAssembly.instantiate(module, imports);
  const e = instance.exports;
  wasi.memory = memory ?? e.memory;
  if (isThreads) {  // this thread's thread-local storage, before any C code runs
    const align = Math.max(e.__tls_align.value, 16), tls = e.malloc(e.__tls_size.value + align);
    e.__wasm_init_tls(Math.ceil(tls / align) * align);
  }
  e._initialize();
  if (threads > 1) await startThreads(module, memory, e, threads - 1);
  self.gk = new GradKern(instance, wasi.memory, isThreads, wasi, webgpu);
  return self.gk;
}

// ---------------------------------------------------------------- the program

// Whether `gradkern train` options ask for --device webgpu.
const asksWebgpu = (args) => args.some((a, i) => a === '--device=webgpu' || (a === '--device' && args[i + 1] === 'webgpu'));

// `gradkern train args` (or `sample`: command) on this machine's files (the
// module's working directory set to `cwd`), with the GK_ variables of `env`,
// its output to this process's stdout and stderr; webgpu: a worker's link to
// the device.
async function trainOnHostFiles({ command = 'train', args, env, cwd, terminal, module, webgpu, threads }) {
  const gk = await load({ files: 'host', module, webgpu, threads });
  gk.wasi.stdoutIsTerminal = terminal;
  if (gk.withString(cwd, (p) => gk.exports.gkjs_chdir(p)) !== 0) throw new Error(`gradkern.wasm: cannot enter ${cwd}`);
  return gk[command]({ args, env, onOutput: (text, stream) => process[stream].write(text) }).exitCode;
}

// The exit status, or null with --device webgpu: the run goes on in a
// worker (the module's WebGPU calls wait on this thread, which holds the
// device), and this process exits with the worker's status when it ends.
async function main(argv) {
  if (argv[0] !== 'train' && argv[0] !== 'sample') {
    process.stderr.write('usage: node wasm/gradkern.mjs train|sample [options]   (gradkern train or sample in ' +
                         'WebAssembly; node wasm/gradkern.mjs train --help lists the options; GK_WASM_DIR: the ' +
                         'directory of gradkern.wasm, default build/wasm; train --device webgpu runs on Dawn, the ' +
                         'npm package webgpu: GK_DAWN_BACKEND picks its backend, opengles by default)\n');
    return 2;
  }
  const { join } = await import('node:path');
  const dir = process.env.GK_WASM_DIR;   // where make wasm put the modules, if not ../build/wasm
  // The pool's size: --threads N, else $GK_NUM_THREADS (as the C code reads
  // them: 0 or anything else means every processor).
  const option = argv.findIndex((a) => a === '--threads' || a.startsWith('--threads='));
  const asked = Number(option < 0 ? process.env.GK_NUM_THREADS
    : argv[option].startsWith('--threads=') ? argv[option].slice(10) : argv[option + 1]);
  const threads = Number.isInteger(asked) && asked >= 1 && asked <= 1024 ? asked : undefined;
  const run = {
    command: argv[0], args: argv.slice(1), cwd: process.cwd(), terminal: !!process.stdout.isTTY,
    env: Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('GK_'))),
    module: dir && join(dir, MODULE_FILES[await defaultBuild(hasSimd(), hasRelaxedSimd(), threads)]), threads,
  };
  if (run.command === 'sample' || !asksWebgpu(run.args)) return trainOnHostFiles(run);
  const { nodeDevice, WebGpuHost } = await import('./webgpu.mjs');
  const { device, reason } = await nodeDevice();
  if (!device) {
    process.stderr.write(`gradkern train: --device webgpu: no WebGPU device: ${reason}\n`);
    return 1;
  }
  const { Worker } = await import('node:worker_threads');
  const host = new WebGpuHost(device);
  const worker = new Worker(new URL(import.meta.url), { workerData: { gkTrain: run, link: host.linkData() } });
  host.serve(worker);
  // Exit once the worker has ended (exiting while it runs crashes Dawn's teardown).
  let status = 1;
  worker.on('message', (m) => { if (m && m.exit !== undefined) status = m.exit; });
  worker.on('error', (e) => process.stderr.write(`gradkern train: the training worker failed: ${e.stack}\n`));
  worker.on('exit', () => {
    if (host.error) process.stderr.write(`gradkern train: the WebGPU device reported: ${host.error}\n`);
    process.exit(status);
  });
  return null;
}

if (isNode) {
  const { isMainThread, parentPort, workerData } = await import('node:worker_threads');
  if (!isMainThread && workerData?.gkTrain) {  // main's worker for --device webgpu
    const webgpu = workerLink(workerData.link, (m) => parentPort.postMessage(m));
    parentPort.postMessage({ exit: await trainOnHostFiles({ ...workerData.gkTrain, webgpu }) });
  } else if (isMainThread && process.argv[1]) {
    const { pathToFileURL } = await import('node:url');
    const { realpathSync } = await import('node:fs');
    if (import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
      const code = await main(process.argv.slice(2));
      if (code !== null) process.exitCode = code;
    }
  }
}
