// The C API structs that JS reads and writes by byte offset (api/sotto.h, wasm32: pointers and size_t are 4
// bytes), in one place. tests/web/struct_layout.test.mjs compiles a check of every size and offset below
// against the header with clang for wasm32, so a field added or moved in C fails the test, not the page.
export const LAYOUT = {
  SottoSampling: {
    size: 40,
    fields: { greedy: [0, 'i32'], temperature: [4, 'f32'], top_k: [8, 'i32'], top_p: [12, 'f32'],
              min_p: [16, 'f32'], repeat_penalty: [20, 'f32'], repeat_last_n: [24, 'i32'],
              max_new_tokens: [28, 'i32'], seed: [32, 'u64'] },
  },
  SottoStep: {
    size: 20,
    fields: { id: [0, 'i32'], done: [4, 'i32'], stop: [8, 'i32'], text_bytes: [12, 'u32'], text: [16, 'ptr'] },
  },
  SottoTimings: {
    size: 48,
    fields: { n_prompt: [0, 'i32'], n_generated: [4, 'i32'], n_decoded: [8, 'i32'], n_past: [12, 'i32'],
              n_dropped: [16, 'i32'], prefill_ms: [24, 'f64'], decode_ms: [32, 'f64'],
              decode_tokens_per_s: [40, 'f64'] },
  },
  SottoVadOptions: {
    size: 40,
    fields: { positive_threshold: [0, 'f32'], negative_threshold: [4, 'f32'], redemption_ms: [8, 'f64'],
              pre_speech_pad_ms: [16, 'f64'], min_speech_ms: [24, 'f64'], frame_ms: [32, 'f64'] },
  },
  SottoVadSegment: {
    size: 16,
    fields: { start_frame: [0, 'i64'], end_frame: [8, 'i64'] },
  },
};

// Byte offset of `field` in struct `name` (throws on a typo rather than reading offset undefined).
export function offsetOf(name, field) {
  const f = LAYOUT[name]?.fields[field];
  if (!f) throw new Error(`struct-layout: no field ${name}.${field}`);
  return f[0];
}

export function sizeOf(name) {
  return LAYOUT[name].size;
}
