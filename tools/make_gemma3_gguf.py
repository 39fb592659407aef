#!/usr/bin/env python3
"""Writes a small Gemma-3-shaped GGUF with seeded random weights, so the gemma3 architecture (embedding scale,
post-attention and post-feed-forward norms, q/k norms, GeGLU, interleaved local sliding-window and global
layers with their own RoPE bases) is tested against llama.cpp in CI without any download.

    python3 tools/make_gemma3_gguf.py OUT.gguf [--type f32|q8_0] [--seed N] [--vocab FILE]

Shape: 8 layers (layers 5 is global, the other local with a window of 8 positions, so prompts of a few dozen
tokens cross the window), n_embd 128, 4 query heads and 2 KV heads of 64, feed-forward 256. The vocabulary
and its SentencePiece tokenizer are copied from --vocab (default: the stories260K fixture, 512 tokens), with
add_space_prefix as that file has it. The same seed gives the same bytes."""
import argparse
import sys

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter
from gguf.quants import quantize

N_LAYER, N_EMBD, N_HEAD, N_HEAD_KV, HEAD_DIM, N_FF = 8, 128, 4, 2, 64, 256
WINDOW, PERIOD = 8, 6


def copy_tokenizer(reader, writer):
    for key, field in reader.fields.items():
        if not key.startswith('tokenizer.'):
            continue
        value = field.contents()
        if key == 'tokenizer.ggml.model':
            writer.add_tokenizer_model(value)
        elif key == 'tokenizer.ggml.tokens':
            writer.add_token_list(value)
        elif key == 'tokenizer.ggml.scores':
            writer.add_token_scores(value)
        elif key == 'tokenizer.ggml.token_type':
            writer.add_token_types(value)
        elif key.endswith('_token_id'):
            writer.add_uint32(key, int(value))
        elif isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, str):
            writer.add_string(key, value)
    return len(reader.fields['tokenizer.ggml.tokens'].data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('out')
    ap.add_argument('--type', choices=['f32', 'q8_0'], default='f32')
    ap.add_argument('--seed', type=int, default=3)
    ap.add_argument('--vocab', default=None)
    args = ap.parse_args()
    vocab_path = args.vocab or __file__.rsplit('/tools/', 1)[0] + '/tests/fixtures/llm/stories260K.gguf'
    rng = np.random.default_rng(args.seed)
    w = GGUFWriter(args.out, 'gemma3')
    w.add_name('gemma3 random test model')
    w.add_context_length(1024)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1000000.0)
    w.add_uint32('gemma3.attention.sliding_window', WINDOW)
    w.add_uint32('gemma3.attention.sliding_window_pattern', PERIOD)
    w.add_float32('gemma3.rope.freq_base_swa', 10000.0)
    n_vocab = copy_tokenizer(GGUFReader(vocab_path), w)

    def matrix(name, rows, cols, std):
        data = (rng.standard_normal((rows, cols)) * std).astype(np.float32)
        if args.type == 'q8_0':
            w.add_tensor(name, quantize(data, GGMLQuantizationType.Q8_0), raw_dtype=GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, data)

    def norm(name, n):
        w.add_tensor(name, (1.0 + 0.3 * rng.standard_normal(n)).astype(np.float32))

    # Scales chosen so activations neither vanish nor blow up through 8 layers of a model this small.
    matrix('token_embd.weight', n_vocab, N_EMBD, 0.05)
    norm('output_norm.weight', N_EMBD)
    for il in range(N_LAYER):
        b = f'blk.{il}.'
        norm(b + 'attn_norm.weight', N_EMBD)
        matrix(b + 'attn_q.weight', N_HEAD * HEAD_DIM, N_EMBD, 0.3)
        matrix(b + 'attn_k.weight', N_HEAD_KV * HEAD_DIM, N_EMBD, 0.3)
        matrix(b + 'attn_v.weight', N_HEAD_KV * HEAD_DIM, N_EMBD, 0.2)
        matrix(b + 'attn_output.weight', N_EMBD, N_HEAD * HEAD_DIM, 0.1)
        norm(b + 'attn_q_norm.weight', HEAD_DIM)
        norm(b + 'attn_k_norm.weight', HEAD_DIM)
        norm(b + 'post_attention_norm.weight', N_EMBD)
        norm(b + 'ffn_norm.weight', N_EMBD)
        matrix(b + 'ffn_gate.weight', N_FF, N_EMBD, 0.2)
        matrix(b + 'ffn_up.weight', N_FF, N_EMBD, 0.2)
        matrix(b + 'ffn_down.weight', N_EMBD, N_FF, 0.1)
        norm(b + 'post_ffw_norm.weight', N_EMBD)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == '__main__':
    sys.exit(main())
