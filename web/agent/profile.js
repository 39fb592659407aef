// The profile: whether the GPU (WebGPU) or the CPU (WebAssembly) runs the models. 'auto' takes the GPU where an
// adapter exists (web/llm.js then checks that it runs the model, and falls back to the CPU by itself).

export async function detectGpu() {
  if (!navigator.gpu) return { adapter: null, text: 'No WebGPU in this browser: the CPU (WebAssembly) runs everything.' };
  try {
    const adapter = await navigator.gpu.requestAdapter();
    if (!adapter) return { adapter: null, text: 'WebGPU is here but offers no GPU: the CPU runs everything.' };
    const info = adapter.info ?? {};
    const name = [info.vendor, info.architecture, info.description].filter(Boolean).join(' ') || 'a GPU';
    return { adapter, text: `WebGPU: ${name}.` };
  } catch (e) {
    return { adapter: null, text: `WebGPU failed to open (${e.message}): the CPU runs everything.` };
  }
}

export function deviceFor(profile, gpu) {
  if (profile === 'cpu') return 'cpu';
  if (profile === 'gpu') return 'webgpu';
  return gpu.adapter ? 'auto' : 'cpu';
}
