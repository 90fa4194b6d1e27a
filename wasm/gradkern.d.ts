// TypeScript declarations of wasm/gradkern.mjs: gradkern (every op forward
// and backward, the trainer of `gradkern train` and `gradkern sample`) in
// WebAssembly, for Node 20 and browsers.

/** Tensor element types, as the C library names them. */
export type DType = 'f32' | 'f64' | 'f16' | 'bf16' | 'i32' | 'i64';

/** The typed array of each dtype: f16 and bf16 are raw bit patterns. */
export type TypedArrayOf = {
  f32: Float32Array; f64: Float64Array; f16: Uint16Array; bf16: Uint16Array; i32: Int32Array; i64: BigInt64Array;
};
export type Tensor = Float32Array | Float64Array | Uint16Array | Int32Array | BigInt64Array;

/**
 * An op description: gk_op_desc of include/gradkern.h. `op` is the library's
 * op name (gk_op_name: 'relu', 'gelu', 'silu', 'sigmoid', 'softplus', 'glu',
 * 'reglu', 'swiglu', 'geglu', 'rmsnorm', 'layernorm', 'linear', 'matmul',
 * 'softmax', 'log_softmax', 'cross_entropy', 'embedding', 'rope',
 * 'attention', 'add', 'mul', 'conv1d', 'selective_scan'); `shape` is the
 * op's main input's. Every other field has the C field's name and meaning,
 * nested as in C (`norm: { eps: 1e-5 }`, `accumulate: 1`,
 * `binary: { b_shape: [1, 8] }`). Enum fields take the C value or a name:
 * dtype fields ('f32', ... or 'same'), act.approximate ('erf' | 'tanh'),
 * gated.form ('split' | 'two_tensor'), ce.reduction ('mean' | 'sum'),
 * rope.layout ('bthd' | 'bhtd'), rope.pairing ('half' | 'interleaved'),
 * scan.b_layout / c_layout ('shared' | 'batch' | 'grouped'), backend
 * ('auto' | 'ref' | 'cpu'). Booleans are 0/1. `act: { from_output: 1 }` on
 * a relu or sigmoid backward takes the forward's output y in place of x
 * (inputs dy, y; dx = dy y (1 - y) for sigmoid, dy (y > 0) for relu).
 */
export interface OpDesc {
  op: string;
  direction?: 'forward' | 'backward';   // default 'forward'
  dtype?: DType;                         // default 'f32'
  shape: number[];
  [field: string]: unknown;
}

/** One argument of a plan, as gk_plan_arg_shape and the plan's checks see it. */
export interface PlanArg {
  name: string;        // gk_arg_name: 'x', 'weight', 'dy', 'rstd', 'A', 'delta_bias', ...
  kind: number;        // gk_arg_kind
  shape: number[];
  numel: number;
  dtype: DType;
  output: boolean;     // written by the run
}

/** A rejected call: `message` is the library's gk_last_error(). */
export class GradKernError extends Error {
  status: number;      // gk_status
  statusName: string;  // gk_status_string(status)
}

export interface Plan {
  readonly kernel: string;          // e.g. 'rmsnorm_fwd__cpu_threads'
  readonly isa: string;             // 'simd128-relaxed', 'simd128' or 'scalar' (the module's level); 'scalar' for ref
  readonly workspaceBytes: number;
  readonly args: PlanArg[];
  /**
   * Run on contiguous row-major typed arrays keyed by argument name. Every
   * input is required; an output may be given (its values are read first:
   * `accumulate: 1`) and is then written in place; the others are returned
   * as new arrays. Throws TypeError for a missing, unknown or wrongly typed
   * or sized array, GradKernError for what the library rejects.
   */
  run(tensors: Record<string, Tensor>): Record<string, Tensor>;
  destroy(): void;
}

/** Progress of a training step (after the optimizer update). */
export interface TrainStep { step: number; steps: number; loss: number; lr: number; }
/** An evaluation on held-out sequences; accuracy is NaN for the text task. */
export interface TrainEval { step: number; loss: number; accuracy: number; }

export interface TrainOptions {
  /** The options of `gradkern train` (see `--help`), e.g. ['--steps', '300', '--checkpoint', 'run.safetensors'];
   *  '--device', 'webgpu' trains on the WebGPU device of a module loaded with one (LoadOptions.webgpu). */
  args?: string[];
  /** Files put in the module's file system before the run, by path ('/book.txt' or 'book.txt': both are '/book.txt'). */
  files?: Record<string, Uint8Array>;
  /** Environment of the run (GK_ISA, ...). */
  env?: Record<string, string>;
  /** Called after every step; return true to end the run there (evaluation and checkpoint follow, as --stop-after). */
  onStep?: (p: TrainStep) => boolean | void;
  /** Called after every evaluation (--eval-every, and at the end). */
  onEval?: (e: TrainEval) => void;
  /** The program's output as it is written (the same text as `gradkern train` prints to a pipe). */
  onOutput?: (text: string, stream: 'stdout' | 'stderr') => void;
}

export interface TrainResult {
  exitCode: number;                        // 0: done; 2: bad options; 1: failed (stderr says why)
  stdout: string;
  stderr: string;
  /** Every file of the module's file system after the run (the checkpoint, the plot, the inputs), by absolute path. */
  files: Record<string, Uint8Array>;
}

/** A backend of the module (gk_backend_get): `device` describes its device ('' on the host: ref, cpu). */
export interface BackendInfo { name: string; available: boolean; reason: string; device: string; }

/** One timed WebGPU dispatch (GradKern.webgpuKernelTimes): its kernel ("softmax.forward": op family and
 *  entry point; "optim.update"), the GPU's timestamp at the start of its compute pass (ns, for ordering),
 *  and its time on the GPU (ms, from the start to the end of the pass). */
export interface KernelTime { kernel: string; beginNs: number; ms: number; }

export interface GradKern {
  readonly version: string;                // gk_version()
  readonly simd: boolean;                  // a SIMD module (every build but gradkern-plain.wasm) or the plain one
  /** Which module, from its CPU level (Plan.isa) and memory: gradkern.wasm, gradkern-plain.wasm,
   *  gradkern-threads.wasm, gradkern-relaxed.wasm, gradkern-relaxed-threads.wasm. */
  readonly build: 'simd' | 'plain' | 'threads' | 'relaxed' | 'relaxed-threads';
  readonly ops: string[];                  // op names, by gk_op value
  readonly exports: WebAssembly.Exports;   // the module's own exports (the C API, malloc, free)
  readonly memory: WebAssembly.Memory;
  /** Create a plan (kernel selected, arguments known). Throws GradKernError naming a bad field. */
  plan(desc: OpDesc): Plan;
  /** plan(desc).run(tensors), then destroy. */
  run(desc: OpDesc, tensors: Record<string, Tensor>): Record<string, Tensor>;
  /**
   * `gradkern train` with the same C code, options and output. Synchronous
   * (the step loop runs in this thread): call it in a Worker from a page.
   * Files live in memory in the module (see TrainOptions.files / TrainResult.files).
   */
  train(options?: TrainOptions): TrainResult;
  /**
   * `gradkern sample` with the same C code, options and output: the text on
   * `stdout` (exitCode 0), e.g. args ['--checkpoint', 'run.safetensors',
   * '--prompt', 'The ', '--tokens', '100'] with files { 'run.safetensors': bytes }.
   * Synchronous, like train(); onStep and onEval are not called.
   */
  sample(options?: TrainOptions): TrainResult;
  /** The backends of this module, in the order the library tries them: ref, cpu, and webgpu, which is available
   *  when the module was loaded with a link to a device (LoadOptions.webgpu); else `reason` says why not. */
  backends(): BackendInfo[];
  /** gk_set_num_threads / gk_get_num_threads: the threads a kernel may use, the caller's included. In
   *  gradkern-threads.wasm at most 1 + the pool threads load() started (LoadOptions.threads); the other
   *  modules have no threads (always 1). Results are the same bits for any number. */
  setNumThreads(n: number): void;
  /** Time every WebGPU dispatch from now on (true) or not (false; the default: timing costs two timestamp
   *  queries per compute pass and a read back per batch). Needs the device's optional feature timestamp-query
   *  (requested by webgpu.mjs where the adapter has it). Returns null, or why not: 'no timestamp-query on this
   *  adapter', or why there is no WebGPU device. */
  webgpuTiming(on: boolean): string | null;
  /** Waits for the work queued, then the GPU times of the dispatches timed since the last call, in dispatch
   *  order. Throws, with the reason, where webgpuTiming cannot time (no zeros). */
  webgpuKernelTimes(): KernelTime[];
  getNumThreads(): number;
  /** f32 values to f16/bf16 bits and back, rounded to nearest even as the library stores them. */
  toHalf(values: ArrayLike<number>, dtype: 'f16' | 'bf16'): Uint16Array;
  fromHalf(bits: ArrayLike<number>, dtype: 'f16' | 'bf16'): Float32Array;
}

export interface LoadOptions {
  /** The module: a URL or path, its bytes, or a compiled module. Default, from build/wasm beside this file's
   *  directory: gradkern-threads.wasm where threads can run (threadsUnavailable() is null) and more than one is
   *  wanted, else gradkern.wasm, or gradkern-plain.wasm where the host has no SIMD; each SIMD one as
   *  gradkern-relaxed-threads.wasm or gradkern-relaxed.wasm where relaxed SIMD is used (LoadOptions.relaxed). */
  module?: string | URL | BufferSource | WebAssembly.Module;
  /** Use a SIMD module (default: hasSimd()). */
  simd?: boolean;
  /** Use a relaxed-SIMD module (default: hasRelaxedSimd()): its matrix products use relaxed multiply-adds,
   *  fused or not as the host decides, so results differ from the SIMD module's in the last bits (and from
   *  one host to another), but not with the number of threads. false forces the SIMD module; true where
   *  the host has no relaxed SIMD fails to compile. Ignored without SIMD. */
  relaxed?: boolean;
  /** Threads, the caller's included (1..1024): load() starts threads - 1 workers (wasm/thread.mjs) on the
   *  module's shared memory, each with an 8 MiB stack, and resolves once they run. Default: the processors
   *  the host reports (navigator.hardwareConcurrency, os.availableParallelism()) where threads can run,
   *  else 1. Asking for more than 1 where they cannot throws, with the reason. The calling thread waits for
   *  the pool inside each kernel: in a browser, load and run gradkern in a Worker (a page's own thread may
   *  not wait), on a page served cross-origin isolated (shared memory). Node's pool threads do not keep the
   *  process alive. */
  threads?: number;
  /** The module's files: 'memory' (default: a file system in memory, the same in Node and browsers; see
   *  TrainOptions.files / TrainResult.files) or, in Node only, 'host': this machine's files (as
   *  `node gradkern.mjs train` uses; paths are absolute, or relative to "/" until gkjs_chdir). */
  files?: 'memory' | 'host';
  /** The WebGPU backend's link to a device (webgpu.mjs): in a worker, workerLink(data, post) with the data of
   *  WebGpuHost.linkData() on the thread that holds the GPUDevice. Without it the backend "webgpu" is listed
   *  as unavailable, with the reason. */
  webgpu?: object;
}

/** Instantiate gradkern.wasm, gradkern-plain.wasm, gradkern-threads.wasm or a relaxed one (LoadOptions.module). */
export function load(options?: LoadOptions): Promise<GradKern>;
/** Whether this host runs WebAssembly SIMD. */
export function hasSimd(): boolean;
/** Whether this host runs WebAssembly relaxed SIMD (browsers with it on; Node 20 with
 *  --experimental-wasm-relaxed-simd). */
export function hasRelaxedSimd(): boolean;
/** Why this thread cannot run gradkern-threads.wasm's pool (no shared memory: a page not cross-origin
 *  isolated; a page's own thread, which may not wait; no Worker), or null if it can. */
export function threadsUnavailable(): string | null;
