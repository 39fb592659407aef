// Parakeet TDT on ONNX Runtime, the way parakeet.js / onnx-asr run NeMo's two-graph export
// (tools/parakeet_export_onnx.py): encoder.onnx once over the log-mel, then decoder_joint.onnx once per greedy step
// with the current encoder frame, the last emitted token and the LSTM state. The greedy rule is the (and
// models/asr/parakeet.h tdt_greedy's): token and duration argmax, the state advances only on a non-blank token, a
// blank with duration 0 moves one frame, at most max_symbols_per_step symbols on one frame.
// Works with onnxruntime-node and onnxruntime-web alike (pass the module as `ort`).
//
//   const p = await OrtParakeet.create(ort, { encoder, decoderJoint, config, threads });  // paths or bytes;
//     // onnxruntime-web: providers: ['wasm'], externalData: { encoder: [{ path, data }], decoderJoint: [...] }
//   const { tokens, frames, durations, encoder, encodeMs, decodeMs } = await p.transcribeMel(mel, nFrames);

export class OrtParakeet {
  static async create(ort, { encoder, decoderJoint, config, threads = 2, providers = ['cpu'], externalData = {} }) {
    const opts = (name) => ({
      executionProviders: providers,
      graphOptimizationLevel: 'all',
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      ...(externalData[name] ? { externalData: externalData[name] } : {}),
    });
    const p = new OrtParakeet();
    p.ort = ort;
    p.config = config;
    p.encoder = await ort.InferenceSession.create(encoder, opts('encoder'));
    p.decoderJoint = await ort.InferenceSession.create(decoderJoint, opts('decoderJoint'));
    return p;
  }

  // mel: Float32Array [128 * nFrames], channels-major (as sotto's front end and NeMo's preprocessor give it).
  async runEncoder(mel, nFrames) {
    const { ort } = this;
    const out = await this.encoder.run({
      audio_signal: new ort.Tensor('float32', mel, [1, 128, nFrames]),
      length: new ort.Tensor('int64', BigInt64Array.from([BigInt(nFrames)]), [1]),
    });
    return out.outputs;  // [1, D, T']
  }

  // Greedy TDT over encoder output `enc` (an ort.Tensor [1, D, T']).
  async decode(enc) {
    const { ort, config: c } = this;
    const [, D, T] = enc.dims;
    const data = enc.data;
    const V = c.vocab_size, blank = c.blank_id, L = c.decoder_layers, H = c.decoder_hidden;
    let h = new ort.Tensor('float32', new Float32Array(L * H), [L, 1, H]);
    let cs = new ort.Tensor('float32', new Float32Array(L * H), [L, 1, H]);
    let last = blank;
    const frame = new Float32Array(D);
    const targetLength = new ort.Tensor('int32', Int32Array.from([1]), [1]);
    const out = { tokens: [], frames: [], durations: [] };
    let t = 0, symbols = 0;
    while (t < T) {
      for (let d = 0; d < D; d++) frame[d] = data[d * T + t];
      const r = await this.decoderJoint.run({
        encoder_outputs: new ort.Tensor('float32', frame.slice(), [1, D, 1]),
        targets: new ort.Tensor('int32', Int32Array.from([last]), [1, 1]),
        target_length: targetLength,
        input_states_1: h,
        input_states_2: cs,
      });
      const l = r.outputs.data;
      let tok = 0, dur = V;
      for (let i = 1; i < V; i++) if (l[i] > l[tok]) tok = i;  // first maximum wins, as torch.argmax
      for (let i = V + 1; i < l.length; i++) if (l[i] > l[dur]) dur = i;
      let d = c.durations[dur - V];
      if (tok !== blank) {
        out.tokens.push(tok);
        out.frames.push(t);
        out.durations.push(d);
        last = tok;
        h = r.output_states_1;
        cs = r.output_states_2;
        symbols++;
      } else if (d === 0) {
        d = 1;
      }
      if (d === 0 && symbols >= c.max_symbols_per_step) d = 1;
      if (d > 0) symbols = 0;
      t += d;
    }
    return out;
  }

  async transcribeMel(mel, nFrames) {
    const t0 = performance.now();
    const enc = await this.runEncoder(mel, nFrames);
    const t1 = performance.now();
    const r = await this.decode(enc);
    return { ...r, encoder: enc, encodeMs: t1 - t0, decodeMs: performance.now() - t1 };
  }

  async release() {
    await this.encoder.release();
    await this.decoderJoint.release();
  }
}
