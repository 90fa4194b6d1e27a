// The WebGPU backend's host side: the imports of module "gk_webgpu" that
// gradkern's C code (src/webgpu) calls, on a GPUDevice the caller hands in.
//
// The C side is synchronous (a download returns the bytes); WebGPU is
// asynchronous (mapAsync, onSubmittedWorkDone). So the WebAssembly instance
// runs in a worker and the GPUDevice stays on the thread that made it:
//
//   worker (gradkern.wasm)                        device thread (WebGpuHost)
//   buffer/pipeline create, write, copy,
//   dispatch: appended to a batch, no waiting
//   submit (end of an op): post the batch    -->  runs the batch in order
//   once it holds 32 dispatches or 1 MiB
//   read / wait: post the batch and a request,
//   Atomics.wait on a SharedArrayBuffer      <--  answers, Atomics.notify
//
// Buffers and pipelines are named by ids the C side picks, so only a read
// or a wait crosses back. Works with Node's worker_threads and browser
// Workers (SharedArrayBuffer needs cross-origin isolation: COOP/COEP).
//
// Device thread:  const host = new WebGpuHost(device); host.serve(worker);
//                 new Worker(..., { workerData: host.linkData() })
// Worker:         const imports = { gk_webgpu: webgpuImports(() => memory, workerLink(data, post)) }
// Without a link, webgpuImports makes the backend report itself unavailable
// with the reason (gradkern.mjs does that when no device is given).

const USAGE = { MAP_READ: 1, COPY_SRC: 4, COPY_DST: 8, UNIFORM: 64, STORAGE: 128, QUERY_RESOLVE: 512 };
const MAP_READ = 1;
const PARAM_SLOT = 256;   // bytes per dispatch's uniform parameters (>= minUniformBufferOffsetAlignment)
const TIMED_PASSES = 2048; // compute passes a timestamp query set covers (two queries each: maxQuerySetSize 4096)
// A worker posts its queued commands to the device thread once they hold
// this many dispatches or bytes to upload (or with a read or a wait): each
// message costs a postMessage, a command encoder, error scopes and a queue
// submit, which for small ops cost more than the GPU's work.
const POST_DISPATCHES = 32, POST_BYTES = 1 << 20;
const TIME_RECORD = 24;    // bytes of a kernel time the C side reads: u32 pipeline, u32 0, f64 begin, f64 end (ns)
// The device limits the C side reads, in the order of src/webgpu/webgpu.h
// (followed there by the words of FEATURES and the subgroup sizes).
const LIMITS = ['maxStorageBufferBindingSize', 'maxBufferSize', 'maxComputeWorkgroupsPerDimension',
                'maxComputeInvocationsPerWorkgroup'];
// The optional features the backend uses when the adapter has them, by
// their bit in the features word (WG_FEATURE_* in src/webgpu/webgpu.h):
// subgroups for the row reductions, timestamp-query for per-kernel times.
const FEATURES = ['subgroups', 'timestamp-query'];
// What a device is requested with: the adapter's own limits for these
// (compatibility mode would otherwise give 128 invocations, 4 storage
// buffers, 128 MiB bindings).
const REQUESTED_LIMITS = [...LIMITS, 'maxComputeWorkgroupSizeX', 'maxComputeWorkgroupSizeY',
                          'maxComputeWorkgroupStorageSize', 'maxStorageBuffersPerShaderStage'];

const encoder = new TextEncoder();
const decoder = new TextDecoder();

// A device from an adapter, with the limits above raised to the adapter's
// and the features of FEATURES it has.
export async function requestDevice(adapter) {
  const requiredLimits = {};
  for (const name of REQUESTED_LIMITS) requiredLimits[name] = adapter.limits[name];
  const requiredFeatures = FEATURES.filter((name) => adapter.features.has(name));
  return adapter.requestDevice({ requiredLimits, requiredFeatures });
}

// Dawn's instances (webgpu.create): a device dies with its instance (the
// process aborts once the instance is garbage-collected), so they are kept
// for the life of the process.
const dawnInstances = [];

// Node: a device from the npm package `webgpu` (Dawn). backend: Dawn's
// backend ('opengles' by default: Mesa's llvmpipe through EGL without a
// display; 'vulkan' for lavapipe or a real GPU). Timestamps are not
// quantized (Dawn rounds them by default, against timing attacks in
// browsers), so that short kernels get times. { device, adapter } or
// { device: null, reason }.
export async function nodeDevice({ backend = process.env.GK_DAWN_BACKEND || 'opengles' } = {}) {
  if (backend === 'opengles' && !process.env.EGL_PLATFORM) process.env.EGL_PLATFORM = 'surfaceless';
  let webgpu;
  try {
    webgpu = await import('webgpu');
  } catch (e) {
    return { device: null, reason: `the npm package 'webgpu' is not installed (npm ci): ${e.message}` };
  }
  const gpu = webgpu.create([`backend=${backend}`, 'disable-dawn-features=timestamp_quantization']);
  dawnInstances.push(gpu);
  const adapter = await gpu.requestAdapter({ featureLevel: 'compatibility' });
  if (!adapter) return { device: null, reason: `Dawn's ${backend} backend found no adapter` };
  return { device: await requestDevice(adapter), adapter };
}

// An adapter's GPUAdapterInfo in a line: "llvmpipe-llvm-15-0-6-256-bits-
// OpenGL version OpenGL ES 3.2 Mesa 22.3.6" (what it has of vendor,
// architecture, device and description).
export function adapterDescription(info) {
  return ['vendor', 'architecture', 'device', 'description'].map((k) => info?.[k]).filter(Boolean).join(' ');
}

// ---------------------------------------------------------------- device thread

// Compiled pipelines kept for plans made again (WebGpuHost's 'pipeline').
export const PIPELINE_CACHE = 256;

// Runs the workers' batches on `device`, in order.
export class WebGpuHost {
  constructor(device) {
    this.device = device;
    this.buffers = new Map();
    this.pipelines = new Map();  // the plans' pipeline ids -> compiled pipelines
    this.compiled = new Map();   // WGSL text, entry point, constants -> { pipeline, layout }
    this.uniform = null;
    this.error = null;
    this.scopes = [];            // error scopes of the batches run since the last sync
    this.chain = Promise.resolve();
    this.encoder = null;
    this.batches = 0;            // batches run so far
    this.timing = false;         // time each dispatch (timestamp-query; the worker's timing(1))
    this.times = [];             // [pipeline id, begin ns, end ns] of the timed dispatches not yet taken
    this.timeReads = [];         // the read backs of timed batches still under way
    device.lost.then((info) => { this.error ??= `the device was lost (${info.reason}): ${info.message}`; });
  }

  // What a worker's workerLink needs: the device's limits, then the bits of
  // its FEATURES and the adapter's smallest and largest subgroup (0 without
  // subgroups), its adapter's description and the shared control words.
  linkData() {
    const limits = LIMITS.map((name) => Math.min(this.device.limits[name], 0xffffffff));
    const features = FEATURES.reduce((bits, name, i) => bits | (this.device.features.has(name) ? 1 << i : 0), 0);
    const info = this.device.adapterInfo;
    const subgroups = features & 1 ? [info.subgroupMinSize ?? 0, info.subgroupMaxSize ?? 0] : [0, 0];
    return { limits: [...limits, features, ...subgroups], description: adapterDescription(info),
             control: new SharedArrayBuffer(16) };
  }

  // Take the batches a worker posts (a Worker or worker_threads Worker).
  serve(worker) {
    const onMessage = (msg) => {
      if (msg && msg.gkWebgpu) this.chain = this.chain.then(() => this.run(msg));
    };
    if (worker.on) worker.on('message', onMessage);
    else worker.addEventListener('message', (e) => onMessage(e.data));
  }

  flush() {
    if (this.encoder) this.device.queue.submit([this.encoder.finish()]);
    this.encoder = null;
  }

  commands() {
    this.encoder ??= this.device.createCommandEncoder();
    return this.encoder;
  }

  async run(msg) {
    const { device } = this;
    const batch = msg.batch;
    this.batches++;
    try {
      device.pushErrorScope('out-of-memory');
      device.pushErrorScope('validation');
      // Every dispatch's parameters go to one uniform buffer, written before
      // the batch's commands (queue order keeps it after earlier batches').
      const dispatches = batch.filter((c) => c[0] === 'dispatch');
      if (dispatches.length) {
        const bytes = dispatches.length * PARAM_SLOT;
        if (!this.uniform || this.uniform.size < bytes) {
          this.uniform?.destroy();
          this.uniform = device.createBuffer({ size: Math.max(bytes, 64 * PARAM_SLOT),
                                               usage: USAGE.UNIFORM | USAGE.COPY_DST });
        }
        const params = new Uint8Array(bytes);
        dispatches.forEach((c, i) => params.set(c[3], i * PARAM_SLOT));
        device.queue.writeBuffer(this.uniform, 0, params);
      }
      let slot = 0;
      const timed = this.timing && dispatches.length ? this.timestamps(dispatches.length) : null;
      for (const c of batch) this.command(c, () => (slot++) * PARAM_SLOT, timed);
      if (timed) this.resolveTimes(timed);
      this.flush();
      if (timed) this.readTimes(timed, dispatches);
      this.scopes.push(device.popErrorScope(), device.popErrorScope());
    } catch (e) {
      this.error ??= `${e.message}`;
    }
    if (msg.sync) await this.answer(msg);
  }

  // Query sets for `count` timed compute passes (two timestamps each) and
  // the buffers they resolve into.
  timestamps(count) {
    const sets = [];
    for (let first = 0; first < count; first += TIMED_PASSES) {
      const queries = 2 * Math.min(TIMED_PASSES, count - first);
      const buffer = (usage) => this.device.createBuffer({ size: queries * 8, usage });
      sets.push({ querySet: this.device.createQuerySet({ type: 'timestamp', count: queries }), queries,
                  resolved: buffer(USAGE.QUERY_RESOLVE | USAGE.COPY_SRC),
                  staging: buffer(USAGE.MAP_READ | USAGE.COPY_DST) });
    }
    return { sets, next: 0 };
  }

  // The timestampWrites of the next timed pass.
  static timestampWrites(timed) {
    const i = timed.next++, set = timed.sets[Math.floor(i / TIMED_PASSES)], q = 2 * (i % TIMED_PASSES);
    return { querySet: set.querySet, beginningOfPassWriteIndex: q, endOfPassWriteIndex: q + 1 };
  }

  // Resolve a batch's timestamps into buffers to map (end of its commands).
  resolveTimes(timed) {
    const encoder = this.commands();
    for (const set of timed.sets) {
      encoder.resolveQuerySet(set.querySet, 0, set.queries, set.resolved, 0);
      encoder.copyBufferToBuffer(set.resolved, 0, set.staging, 0, set.queries * 8);
    }
  }

  // Read them back once submitted, without waiting: they join this.times (in
  // dispatch order) once mapped; the 'times' request waits for the reads
  // under way.
  readTimes(timed, dispatches) {
    const read = Promise.all(timed.sets.map(async (set) => {
      await set.staging.mapAsync(MAP_READ);
      const ticks = new BigUint64Array(set.staging.getMappedRange()).slice();
      set.staging.unmap();
      for (const b of [set.staging, set.resolved, set.querySet]) b.destroy();
      return ticks;
    })).then((parts) => {
      parts.forEach((ticks, p) => {
        for (let q = 0; q < ticks.length; q += 2)
          this.times.push([dispatches[p * TIMED_PASSES + q / 2][1], Number(ticks[q]), Number(ticks[q + 1])]);
      });
    });
    this.timeReads.push(read);
  }

  command(c, nextParams, timed) {
    const { device } = this;
    switch (c[0]) {
      case 'create':
        this.buffers.set(c[1], device.createBuffer({ size: c[2], usage: USAGE.STORAGE | USAGE.COPY_SRC | USAGE.COPY_DST }));
        break;
      case 'destroy':
        this.flush();
        this.buffers.get(c[1])?.destroy();
        this.buffers.delete(c[1]);
        break;
      case 'write':
        this.flush();
        device.queue.writeBuffer(this.buffers.get(c[1]), c[2], c[3]);
        break;
      case 'copy':
        this.commands().copyBufferToBuffer(this.buffers.get(c[1]), c[2], this.buffers.get(c[3]), c[4], c[5]);
        break;
      case 'pipeline': {
        // A pipeline stays compiled after the plans that use it are destroyed
        // (the PIPELINE_CACHE most recently asked for), so a plan made again
        // does not compile its shaders again: shader compilation is most of
        // a plan's cost on software adapters.
        const key = `${c[3]}\n${c[4]}\n${c[2]}`;
        let compiled = this.compiled.get(key);
        if (compiled) {
          this.compiled.delete(key);  // most recently used: last in the map's order
        } else {
          const constants = Object.fromEntries(c[4].split(',').filter(Boolean).map((kv) => {
            const [name, value] = kv.split('=');
            return [name, Number(value)];
          }));
          const pipeline = device.createComputePipeline({
            layout: 'auto', compute: { module: device.createShaderModule({ code: c[2] }), entryPoint: c[3], constants } });
          compiled = { pipeline, layout: pipeline.getBindGroupLayout(0) };
          if (this.compiled.size >= PIPELINE_CACHE) this.compiled.delete(this.compiled.keys().next().value);
        }
        this.compiled.set(key, compiled);
        this.pipelines.set(c[1], compiled);
        break;
      }
      case 'unpipeline':
        this.pipelines.delete(c[1]);
        break;
      case 'dispatch': {
        const p = this.pipelines.get(c[1]);
        const entries = [{ binding: 0, resource: { buffer: this.uniform, offset: nextParams(), size: PARAM_SLOT } }];
        for (let i = 0; i < c[2].length; i += 4) {
          const [binding, id, offset, size] = c[2].slice(i, i + 4);
          entries.push({ binding, resource: { buffer: this.buffers.get(id), offset, size: size || undefined } });
        }
        const bindGroup = device.createBindGroup({ layout: p.layout, entries });
        const timestampWrites = timed ? WebGpuHost.timestampWrites(timed) : undefined;
        const pass = this.commands().beginComputePass(timed ? { timestampWrites } : {});
        pass.setPipeline(p.pipeline);
        pass.setBindGroup(0, bindGroup);
        pass.dispatchWorkgroups(c[4], c[5]);
        pass.end();
        break;
      }
      case 'timing':
        this.timing = c[1];
        break;
      default:
        throw new Error(`gk_webgpu: unknown command ${c[0]}`);
    }
  }

  // A read or a wait: run it after everything before, then wake the worker
  // with the status (and the bytes, or the error's text, in msg.data).
  async answer(msg) {
    const control = new Int32Array(msg.control);
    const data = new Uint8Array(msg.data);
    try {
      if (msg.sync.op === 'read') {
        const { id, offset, bytes } = msg.sync;
        const lo = offset - (offset % 4), hi = Math.ceil((offset + bytes) / 4) * 4;
        const staging = this.device.createBuffer({ size: Math.max(hi - lo, 4), usage: USAGE.MAP_READ | USAGE.COPY_DST });
        // The copy's own errors (a range past the buffer) fail the read:
        // uncaptured, they would leave the staging buffer's zeros as the bytes.
        this.device.pushErrorScope('validation');
        let copied;
        try {
          this.commands().copyBufferToBuffer(this.buffers.get(id), lo, staging, 0, hi - lo);
          this.flush();
        } finally {
          copied = this.device.popErrorScope();
        }
        await staging.mapAsync(MAP_READ);
        const copyError = await copied;
        if (copyError) this.error ??= `reading buffer ${id} (bytes ${offset} to ${offset + bytes}): ${copyError.message}`;
        if (!this.error) data.set(new Uint8Array(staging.getMappedRange(), offset - lo, bytes));
        staging.unmap();
        staging.destroy();
      } else if (msg.sync.op === 'times') {
        // The kernel times so far (this.times), as TIME_RECORD-byte records.
        await Promise.all(this.timeReads.splice(0));
        const times = this.times.splice(0, Math.floor(data.length / TIME_RECORD));
        const view = new DataView(data.buffer);
        times.forEach(([pipeline, begin, end], i) => {
          view.setUint32(i * TIME_RECORD, pipeline, true);
          view.setUint32(i * TIME_RECORD + 4, 0, true);
          view.setFloat64(i * TIME_RECORD + 8, begin, true);
          view.setFloat64(i * TIME_RECORD + 16, end, true);
        });
        control[3] = times.length;
      } else {
        await this.device.queue.onSubmittedWorkDone();
      }
      for (const e of await Promise.all(this.scopes.splice(0))) if (e) this.error ??= e.message;
    } catch (e) {
      this.error ??= `${e.message}`;
    }
    let status = 0;
    if (this.error) {
      const text = encoder.encode(this.error).subarray(0, data.length);
      data.set(text);
      control[2] = text.length;
      status = 1;
    }
    control[1] = status;
    Atomics.store(control, 0, 1);
    Atomics.notify(control, 0);
  }
}

// ---------------------------------------------------------------- worker

// The worker's end of a link: `data` from WebGpuHost.linkData() (passed to
// the worker), `post` posts a message to the device thread.
export function workerLink(data, post) {
  return { limits: data.limits, description: data.description ?? '', control: new Int32Array(data.control), post };
}

// The "gk_webgpu" imports over `link` (null: no device, `reason` says why).
// memory(): the instance's WebAssembly.Memory (known after instantiation).
export function webgpuImports(memory, link, reason = 'no WebGPU device was handed to the module') {
  const bytes = () => new Uint8Array(memory().buffer);
  const writeText = (text, ptr, cap) => {
    const t = encoder.encode(text).subarray(0, Math.max(cap - 1, 0));
    bytes().set(t, ptr);
    if (cap > 0) bytes()[ptr + t.length] = 0;
  };
  // Why this link cannot time kernels, or null.
  const noTimestamps = () => !link ? reason : link.limits[LIMITS.length] & 2 ? null
    : 'no timestamp-query on this adapter';
  let batch = [];
  let batchDispatches = 0, batchBytes = 0;  // what `batch` holds: submit() posts it past POST_DISPATCHES or POST_BYTES
  let timing = false;                // timing(1) was called
  let timedSince = 0;                // dispatches issued since, whose times are not yet taken
  // pipeline id -> "family.entry" (pipeline_label) or its entry point; kept
  // after the pipeline is destroyed (ids are not reused) for times read later
  const labels = new Map();
  let shared = typeof SharedArrayBuffer !== 'undefined' ? new SharedArrayBuffer(1 << 16) : null;
  const post = (sync) => {
    link.post({ gkWebgpu: true, batch, sync, control: link.control.buffer, data: shared });
    batch = [];
    batchDispatches = batchBytes = 0;
  };
  // Post the batch with a request and sleep until the device thread answers:
  // the status; a failure's text is written to (message, cap).
  const request = (sync, need, message, cap) => {
    if (shared.byteLength < need) shared = new SharedArrayBuffer(Math.max(need, 2 * shared.byteLength));
    Atomics.store(link.control, 0, 0);
    post(sync);
    Atomics.wait(link.control, 0, 0);
    const status = link.control[1];
    if (status) writeText(decoder.decode(new Uint8Array(shared).slice(0, link.control[2])), message, cap);
    return status;
  };
  return {
    device_info(textPtr, cap, limitsPtr) {
      if (!link) {
        writeText(reason, textPtr, cap);
        return 0;
      }
      if (!shared) {
        writeText('SharedArrayBuffer is not available (a page needs COOP/COEP headers)', textPtr, cap);
        return 0;
      }
      new Uint32Array(memory().buffer, limitsPtr, link.limits.length).set(link.limits);
      writeText(link.description, textPtr, cap);
      return 1;
    },
    buffer_create(id, size) { batch.push(['create', id, size]); },
    buffer_destroy(id) { batch.push(['destroy', id]); },
    buffer_write(id, offset, src, size) {
      batch.push(['write', id, offset, bytes().slice(src, src + size)]);
      batchBytes += size;
    },
    buffer_copy(src, srcOffset, dst, dstOffset, size) { batch.push(['copy', src, srcOffset, dst, dstOffset, size]); },
    buffer_read(id, offset, dst, size, message, cap) {
      const status = request({ op: 'read', id, offset, bytes: size }, size, message, cap);
      if (!status) bytes().set(new Uint8Array(shared, 0, size), dst);
      return status;
    },
    pipeline_create(id, wgsl, len, entry, overrides) {
      const m = bytes();
      const text = (at) => {
        let end = at;
        while (m[end]) end++;
        return decoder.decode(m.slice(at, end));
      };
      labels.set(id, text(entry));  // until pipeline_label names it
      batch.push(['pipeline', id, decoder.decode(m.slice(wgsl, wgsl + len)), text(entry), text(overrides)]);
    },
    pipeline_destroy(id) { batch.push(['unpipeline', id]); },
    pipeline_label(id, text, len) { labels.set(id, decoder.decode(bytes().slice(text, text + len))); },
    dispatch(pipeline, bindings, nbindings, params, paramBytes, x, y) {
      // (binding, buffer id, offset, size) per binding, as wg_binding in src/webgpu/webgpu.h
      const records = Array.from(new Uint32Array(memory().buffer, bindings, nbindings * 4));
      if (timing) timedSince++;
      batch.push(['dispatch', pipeline, records, bytes().slice(params, params + paramBytes), x, y]);
      batchDispatches++;
    },
    // The end of an op: the batch goes to the device thread once it holds
    // enough work to be worth a message and a queue submit there; until
    // then ops join it, and a read, a wait or timing posts it with them.
    submit() {
      if (batchDispatches >= POST_DISPATCHES || batchBytes >= POST_BYTES) post(null);
    },
    wait(message, cap) { return request({ op: 'wait' }, 0, message, cap); },
    // Time the dispatches from now on (on: 1) or not; the C side checks
    // that the device has timestamp-query first.
    timing(on) {
      timing = on !== 0;
      batch.push(['timing', timing]);
      post(null);
    },
    // After everything queued: the times of the dispatches timed since the
    // last call, in dispatch order, at most `cap` records of TIME_RECORD
    // bytes at dst (gk_webgpu_kernel_time); their count, or -1 with the
    // device's error in `message`.
    kernel_times(dst, cap, message, messageCap) {
      const status = request({ op: 'times' }, timedSince * TIME_RECORD, message, messageCap);
      if (status) return -1;
      const count = Math.min(link.control[3], cap);
      bytes().set(new Uint8Array(shared, 0, count * TIME_RECORD), dst);
      timedSince = 0;
      return count;
    },
    // For gradkern.mjs (not imports): timing from JavaScript (null, or why
    // not), and the times with the kernels' names.
    jsTiming(on) {
      const why = noTimestamps();
      if (!why) this.timing(on ? 1 : 0);
      return why;
    },
    jsKernelTimes() {
      const why = noTimestamps();
      if (why) throw new Error(`gk_webgpu: no kernel times: ${why}`);
      const times = [];
      if (request({ op: 'times' }, timedSince * TIME_RECORD, 0, 0)) {
        const text = decoder.decode(new Uint8Array(shared).slice(0, link.control[2]));
        throw new Error(`gk_webgpu: reading the kernel times: the device reported: ${text}`);
      }
      const view = new DataView(shared, 0, link.control[3] * TIME_RECORD);
      for (let i = 0; i < link.control[3]; i++) {
        const id = view.getUint32(i * TIME_RECORD, true);
        const begin = view.getFloat64(i * TIME_RECORD + 8, true), end = view.getFloat64(i * TIME_RECORD + 16, true);
        times.push({ kernel: labels.get(id), beginNs: begin, ms: (end - begin) / 1e6 });
      }
      timedSince = 0;
      return times;
    },
  };
}
