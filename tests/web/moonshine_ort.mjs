// Moonshine base's greedy decoding on ONNX Runtime sessions of its .ort files: the independent reference, as
// our engine decodes: BOS 1, stop at EOS 2 or after floor(seconds * 6.5) + 1 tokens; the merged decoder's first
// step takes the no-cache branch (empty past), later steps the cache branch, which returns empty
// cross-attention keys/values: the first step's are kept. No Node imports: onnxruntime-node
// (moonshine_support.mjs's OrtMoonshine) and onnxruntime-web in a page (bench/moonshine_web.mjs) both run it.
const LAYERS = 8, HEADS = 8, HEAD_DIM = 52;

// ort: the onnxruntime module; samples: Float32Array at 16 kHz -> {tokens (no BOS/EOS), encodeMs, decodeMs}
export async function ortGreedy(ort, encoder, decoder, samples) {
  const { Tensor } = ort;
  const t0 = performance.now();
  const enc = (await encoder.run({ input_values: new Tensor('float32', samples, [1, samples.length]) })).last_hidden_state;
  const t1 = performance.now();
  const empty = new Tensor('float32', new Float32Array(0), [1, HEADS, 0, HEAD_DIM]);
  const maxTokens = Math.floor((samples.length / 16000) * 6.5) + 1;
  const tokens = [];
  let past = null, token = 1;
  while (tokens.length < maxTokens) {
    const feeds = { input_ids: new Tensor('int64', BigInt64Array.from([BigInt(token)]), [1, 1]), encoder_hidden_states: enc };
    for (let i = 0; i < LAYERS; i++)
      for (const a of ['decoder', 'encoder'])
        for (const kv of ['key', 'value'])
          feeds[`past_key_values.${i}.${a}.${kv}`] = past ? past[`present.${i}.${a}.${kv}`] : empty;
    feeds.use_cache_branch = new Tensor('bool', Uint8Array.from([past !== null ? 1 : 0]), [1]);
    const out = await decoder.run(feeds);
    if (past) for (const k of Object.keys(out)) if (k.includes('.encoder.')) out[k] = past[k];
    past = out;
    const logits = out.logits.data;
    let best = 0;
    for (let v = 1; v < logits.length; v++) if (logits[v] > logits[best]) best = v;
    if (best === 2) break;
    tokens.push(best);
    token = best;
  }
  return { tokens, encodeMs: t1 - t0, decodeMs: performance.now() - t1 };
}
