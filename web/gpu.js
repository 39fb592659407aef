// The WebGPU side of the device seam (src/gpu/device.h, src/gpu/device_wasm.cpp): the functions the module
// imports as sotto_gpu_* (src/gpu/webgpu_imports_wasm.h), implemented on one GPUDevice that lives in the
// engine worker. WebGPU objects sit in a table keyed by small integer handles; wasm only sees the numbers.
//
//   const gpu = new GpuBridge();                    // before instantiating: its imports go into the module
//   await gpu.open({ timestamps: true });           // navigator.gpu, or npm `webgpu` in Node
//   ... call into wasm; when it reports Pending:  await gpu.pending();  and call back in.
//
// Nothing thrown here crosses into wasm: a failing import records the message (lastError) and returns 0 or a
// nonzero status. Errors WebGPU reports later (a shader that does not compile, a validation error, the device
// lost) are caught with error scopes and make the bridge's error sticky: every later read fails with it.
const isNode = typeof process !== 'undefined' && !!process.versions?.node && typeof window === 'undefined';

// TextDecoder refuses views of a SharedArrayBuffer: copy the bytes first.
function readString(memory, ptr, len) {
  return new TextDecoder().decode(new Uint8Array(memory.buffer, ptr, len).slice());
}

const MAP_READ = 0x0001;
const COPY_DST = 0x0008;
const QUERY_RESOLVE = 0x0200;
// queue.writeBuffer copies from a view of the shared wasm memory in slices of this size: Dawn in Node crashes
// on views of a SharedArrayBuffer and browsers may refuse them, so each slice is copied to a plain buffer.
const WRITE_SLICE_BYTES = 8 << 20;

// Limits the engine asks for: as much as the adapter allows, since model weights live in big buffers.
const LIMITS = ['maxBufferSize', 'maxStorageBufferBindingSize', 'maxStorageBuffersPerShaderStage',
  'maxComputeWorkgroupStorageSize', 'maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupSizeX',
  'maxComputeWorkgroupsPerDimension'];

// navigator.gpu, or npm `webgpu` (Dawn) in Node: on a machine without a GPU, Dawn needs a Vulkan driver,
// e.g. LD_LIBRARY_PATH=/usr/lib/chromium VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json.
async function gpuEntryPoint() {
  if (!isNode) {
    if (!globalThis.navigator?.gpu) throw new Error('webgpu: navigator.gpu is missing (this browser or context has no WebGPU)');
    return navigator.gpu;
  }
  let dawn;
  try {
    dawn = await import('webgpu');
  } catch (e) {
    throw new Error(`webgpu: cannot load npm 'webgpu' in Node (${e.message})`);
  }
  Object.assign(globalThis, dawn.globals);  // GPUBufferUsage, GPUMapMode, ...
  return dawn.create([]);
}

// JS Promise Integration: wasm can suspend on a promise (Chromium 137+; not Node 20).
export function hasJspi() {
  return typeof WebAssembly.Suspending === 'function' && typeof WebAssembly.promising === 'function';
}

export class GpuBridge {
  device = null;
  adapterInfo = null;  // {description, backend, features, limits}
  lastError = '';
  stickyError = '';    // the first asynchronous error: later reads fail with it
  isLost = false;
  lastTimings = [];    // [{label, ns}] of the last timed run, once resolved
  #objects = new Map();  // handle -> GPUBuffer | {pipeline, label} | GPUBindGroup
  #reads = new Map();    // read handle -> {state: 'pending' | 'done' | 'error', data, message}
  #pending = new Set();  // promises wasm may be waiting on
  #nextHandle = 1;
  #memory = null;
  #entry = null;
  #adapter = null;

  // Opens the adapter and device. Options: powerPreference ('high-performance'), timestamps (ask for
  // timestamp-query when present).
  async open({ powerPreference = 'high-performance', timestamps = true } = {}) {
    if (this.device) return this.adapterInfo;
    const gpu = await gpuEntryPoint();
    const adapter = await gpu.requestAdapter({ powerPreference });
    if (!adapter) {
      throw new Error(isNode
        ? 'webgpu: no adapter (Node: Dawn found no Vulkan driver; try LD_LIBRARY_PATH=/usr/lib/chromium VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json)'
        : 'webgpu: no adapter (requestAdapter() returned null)');
    }
    const wanted = ['shader-f16', 'subgroups', ...(timestamps ? ['timestamp-query'] : [])];
    const requiredFeatures = wanted.filter((f) => adapter.features.has(f));
    const requiredLimits = {};
    for (const name of LIMITS) if (adapter.limits[name] !== undefined) requiredLimits[name] = adapter.limits[name];
    const device = await adapter.requestDevice({ requiredFeatures, requiredLimits });
    device.lost.then((info) => {
      this.isLost = true;
      this.#fail(`webgpu: the device was lost (${info.reason || 'unknown'}: ${info.message})`);
    });
    device.onuncapturederror = (e) => this.#fail(`webgpu: ${e.error?.message ?? e.error}`);
    const info = adapter.info ?? {};
    const packedDot = gpu.wgslLanguageFeatures ? gpu.wgslLanguageFeatures.has('packed_4x8_integer_dot_product') : true;
    // Hold the entry point and adapter as long as the device: in Node, a collected `webgpu` instance frees
    // Dawn's instance under the live device (crashes in its event processing, measured).
    this.#entry = gpu;
    this.#adapter = adapter;
    this.device = device;
    this.adapterInfo = {
      description: [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(' ') || 'WebGPU adapter',
      backend: isNode ? 'dawn-node' : 'browser',
      features: [...device.features].sort(),
      shaderF16: device.features.has('shader-f16'),
      subgroups: device.features.has('subgroups'),
      timestamps: device.features.has('timestamp-query'),
      packedDot,
      limits: Object.fromEntries(LIMITS.map((n) => [n, device.limits[n]])),
    };
    return this.adapterInfo;
  }

  // Resolves when every map and error check wasm may be waiting on has settled (never rejects).
  async pending() {
    while (this.#pending.size) await Promise.allSettled([...this.#pending]);
  }

  #track(promise) {
    const p = promise.then(() => {}, (e) => this.#fail(`webgpu: ${e?.message ?? e}`)).finally(() => this.#pending.delete(p));
    this.#pending.add(p);
    return p;
  }

  #fail(message) {
    this.lastError = message;
    if (!this.stickyError) this.stickyError = message;
  }

  // Runs `fn` inside a validation error scope; a validation error it causes (now or asynchronously, e.g. a
  // shader compile error) becomes the sticky error, prefixed with `what`.
  #scoped(what, fn) {
    // A lost device never settles its scopes (Dawn's Node binding then complains at exit); its error is
    // already sticky.
    if (this.isLost) return fn();
    this.device.pushErrorScope('validation');
    let value;
    try {
      value = fn();
    } finally {
      this.#track(this.device.popErrorScope().then((e) => {
        if (e) this.#fail(`webgpu: ${what}: ${e.message}`);
      }));
    }
    return value;
  }

  #add(object) {
    const handle = this.#nextHandle++;
    this.#objects.set(handle, object);
    return handle;
  }

  #get(handle, what) {
    const o = this.#objects.get(handle);
    if (!o) throw new Error(`webgpu: ${what} handle ${handle} does not exist`);
    return o;
  }

  // Import wrappers: a thrown error becomes lastError and the import's failure value.
  #guard(failure, fn) {
    return (...args) => {
      try {
        if (!this.device) throw new Error('webgpu: no device (open WebGPU in the engine first)');
        return fn(...args);
      } catch (e) {
        this.lastError = String(e?.message ?? e);
        return failure;
      }
    };
  }

  #string(ptr, len) {
    return len ? readString(this.#memory, ptr, len) : '';
  }

  #run(commandsPtr, count, timed) {
    const view = new DataView(this.#memory.buffer, commandsPtr, count * 56);
    const device = this.device;
    const encoder = device.createCommandEncoder();
    const labels = [];
    let query = null;
    if (timed) {
      query = device.createQuerySet({ type: 'timestamp', count: 2 * count });
    }
    let pass = null;
    for (let i = 0; i < count; i++) {
      const at = i * 56;
      const copyBytes = Number(view.getBigUint64(at + 48, true));
      if (copyBytes > 0) {
        pass?.end();
        pass = null;
        encoder.copyBufferToBuffer(this.#get(view.getUint32(at + 20, true), 'buffer'), Number(view.getBigUint64(at + 32, true)),
          this.#get(view.getUint32(at + 24, true), 'buffer'), Number(view.getBigUint64(at + 40, true)), copyBytes);
        labels.push('copy');
        continue;
      }
      const pipeline = this.#get(view.getUint32(at, true), 'pipeline');
      if (!pass || timed) {
        pass?.end();
        pass = encoder.beginComputePass(timed ? { timestampWrites: { querySet: query, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 } } : {});
      }
      pass.setPipeline(pipeline.pipeline);
      pass.setBindGroup(0, this.#get(view.getUint32(at + 4, true), 'bind group'));
      pass.dispatchWorkgroups(view.getUint32(at + 8, true), view.getUint32(at + 12, true), view.getUint32(at + 16, true));
      labels.push(pipeline.label);
    }
    pass?.end();
    let staging = null;
    if (timed) {
      const bytes = 16 * count;
      const resolve = device.createBuffer({ size: bytes, usage: QUERY_RESOLVE | 0x0004 });
      staging = device.createBuffer({ size: bytes, usage: MAP_READ | COPY_DST });
      encoder.resolveQuerySet(query, 0, 2 * count, resolve, 0);
      encoder.copyBufferToBuffer(resolve, 0, staging, 0, bytes);
      this.#track(device.queue.onSubmittedWorkDone().then(() => resolve.destroy()));
    }
    device.queue.submit([encoder.finish()]);
    if (timed) {
      this.#track(staging.mapAsync(MAP_READ).then(() => {
        const t = new BigUint64Array(staging.getMappedRange().slice(0));
        this.lastTimings = labels.map((label, i) => ({ label, ns: label === 'copy' ? 0 : Number(t[2 * i + 1] - t[2 * i]) }));
        staging.destroy();
        query.destroy();
      }));
    }
  }

  // The module's sotto_gpu_* imports, on `memory` (the shared wasm memory). Helpers' instances get the same
  // functions; they never call them.
  imports(memory) {
    this.#memory = memory;
    return {
      sotto_gpu_available: () => (this.device && !this.isLost ? 1 : 0),
      sotto_gpu_lost: () => (this.isLost ? 1 : 0),
      sotto_gpu_last_error: (dst, capacity) => {
        const bytes = new TextEncoder().encode(this.stickyError || this.lastError);
        new Uint8Array(this.#memory.buffer, dst, Math.min(capacity, bytes.length)).set(bytes.subarray(0, capacity));
        return bytes.length;
      },
      sotto_gpu_info: (out) => {
        const d = new DataView(this.#memory.buffer, out, 144);
        new Uint8Array(this.#memory.buffer, out, 144).fill(0);
        const a = this.adapterInfo;
        if (!a) return;
        const l = a.limits;
        d.setFloat64(0, l.maxBufferSize ?? 0, true);
        // SOTTO_GPU_MAX_BINDING (Node) or globalThis.SOTTO_GPU_MAX_BINDING (a page): report a smaller storage
        // binding limit, so tests can make small models' matrices split as the real files' output tables do.
        const cap = Number((isNode ? globalThis.process?.env?.SOTTO_GPU_MAX_BINDING : undefined) ?? globalThis.SOTTO_GPU_MAX_BINDING ?? 0);
        const binding = cap >= 256 ? Math.min(cap, l.maxStorageBufferBindingSize ?? 0) : (l.maxStorageBufferBindingSize ?? 0);
        d.setFloat64(8, binding, true);
        const u32 = [l.maxStorageBuffersPerShaderStage, l.maxComputeWorkgroupStorageSize, l.maxComputeInvocationsPerWorkgroup,
          l.maxComputeWorkgroupSizeX, l.maxComputeWorkgroupsPerDimension, this.device.limits.minStorageBufferOffsetAlignment,
          this.device.limits.minUniformBufferOffsetAlignment];
        u32.forEach((v, i) => d.setUint32(16 + 4 * i, v ?? 0, true));
        d.setUint32(44, (a.shaderF16 ? 1 : 0) | (a.subgroups ? 2 : 0) | (a.timestamps ? 4 : 0) | (a.packedDot ? 8 : 0), true);
        const put = (text, at, size) => new Uint8Array(this.#memory.buffer, out + at, size - 1).set(new TextEncoder().encode(text).subarray(0, size - 1));
        put(a.description, 48, 80);
        put(a.backend, 128, 16);
      },
      sotto_gpu_create_buffer: this.#guard(0, (bytes, usage, labelPtr, labelLen) => {
        const label = this.#string(labelPtr, labelLen);
        const max = this.device.limits.maxBufferSize;
        if (bytes > max) throw new Error(`buffer '${label}' of ${bytes} bytes exceeds maxBufferSize (${max} bytes)`);
        // Out of memory is an error WebGPU reports asynchronously: catch it with a scope.
        if (this.isLost) throw new Error(this.stickyError);
        this.device.pushErrorScope('out-of-memory');
        const buffer = this.#scoped(`buffer '${label}'`, () => this.device.createBuffer({ size: bytes, usage, label }));
        this.#track(this.device.popErrorScope().then((e) => {
          if (e) this.#fail(`webgpu: out of GPU memory creating buffer '${label}' of ${bytes} bytes (${e.message})`);
        }));
        return this.#add(buffer);
      }),
      sotto_gpu_destroy_buffer: (handle) => {
        const buffer = this.#objects.get(handle);
        this.#objects.delete(handle);
        buffer?.destroy?.();
      },
      sotto_gpu_release: (handle) => {
        this.#objects.delete(handle);
      },
      sotto_gpu_write_buffer: this.#guard(2, (handle, offset, ptr, bytes) => {
        const buffer = this.#get(handle, 'buffer');
        for (let done = 0; done < bytes; done += WRITE_SLICE_BYTES) {
          const n = Math.min(WRITE_SLICE_BYTES, bytes - done);
          this.device.queue.writeBuffer(buffer, offset + done, new Uint8Array(this.#memory.buffer, ptr + done, n).slice());
        }
        return 0;
      }),
      sotto_gpu_create_pipeline: this.#guard(0, (wgslPtr, wgslLen, entryPtr, entryLen, labelPtr, labelLen) => {
        const label = this.#string(labelPtr, labelLen);
        const code = this.#string(wgslPtr, wgslLen);
        const entryPoint = this.#string(entryPtr, entryLen);
        const pipeline = this.#scoped(`pipeline '${label}'`, () => {
          const module = this.device.createShaderModule({ code, label });
          // The compiler's messages with line numbers: better than the scope's summary.
          this.#track(module.getCompilationInfo?.().then((ci) => {
            const errors = ci.messages.filter((m) => m.type === 'error');
            if (errors.length) this.#fail(`webgpu: pipeline '${label}': WGSL: ${errors.map((m) => `${m.lineNum}:${m.linePos}: ${m.message}`).join('; ')}`);
          }) ?? Promise.resolve());
          return this.device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint }, label });
        });
        return this.#add({ pipeline, label });
      }),
      sotto_gpu_create_bind_group: this.#guard(0, (pipelineHandle, bindingsPtr, count) => {
        const { pipeline, label } = this.#get(pipelineHandle, 'pipeline');
        const view = new DataView(this.#memory.buffer, bindingsPtr, count * 24);
        const entries = [];
        for (let i = 0; i < count; i++) {
          const size = Number(view.getBigUint64(24 * i + 16, true));
          const resource = { buffer: this.#get(view.getUint32(24 * i + 4, true), 'buffer'), offset: Number(view.getBigUint64(24 * i + 8, true)) };
          if (size) resource.size = size;
          entries.push({ binding: view.getUint32(24 * i, true), resource });
        }
        return this.#add(this.#scoped(`bind group of '${label}'`, () => this.device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries })));
      }),
      sotto_gpu_run: this.#guard(2, (commandsPtr, count, timed) => {
        if (this.stickyError) throw new Error(this.stickyError);
        this.#scoped('run', () => this.#run(commandsPtr, count, timed && this.adapterInfo.timestamps));
        return 0;
      }),
      sotto_gpu_start_read: this.#guard(0, (handle, offset, bytes) => {
        const source = this.#get(handle, 'buffer');
        const staging = this.device.createBuffer({ size: bytes, usage: MAP_READ | COPY_DST });
        const encoder = this.device.createCommandEncoder();
        encoder.copyBufferToBuffer(source, offset, staging, 0, bytes);
        this.#scoped('read', () => this.device.queue.submit([encoder.finish()]));
        const read = { state: 'pending', data: null, message: '' };
        const readHandle = this.#nextHandle++;
        this.#reads.set(readHandle, read);
        this.#track(staging.mapAsync(MAP_READ).then(() => {
          read.data = new Uint8Array(staging.getMappedRange().slice(0));
          read.state = 'done';
        }, (e) => {
          read.state = 'error';
          read.message = `webgpu: reading ${bytes} bytes back failed (${e?.message ?? e})`;
        }).finally(() => staging.destroy()));
        return readHandle;
      }),
      // Where JS Promise Integration exists, a synchronous reader (the op harness) suspends here until the
      // device's pending maps settle; elsewhere it cannot wait.
      sotto_gpu_wait: hasJspi() ? new WebAssembly.Suspending(async () => {
        await this.pending();
        return 0;
      }) : () => 1,
      sotto_gpu_finish_read: (readHandle, dst) => {
        const read = this.#reads.get(readHandle);
        if (!read) {
          this.lastError = `webgpu: read handle ${readHandle} does not exist`;
          return 2;
        }
        if (read.state === 'pending' && !this.stickyError) return 1;
        this.#reads.delete(readHandle);
        if (this.stickyError || read.state === 'error') {
          this.lastError = this.stickyError || read.message;
          return 2;
        }
        new Uint8Array(this.#memory.buffer, dst, read.data.length).set(read.data);
        return 0;
      },
    };
  }
}

