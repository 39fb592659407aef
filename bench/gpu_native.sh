#!/usr/bin/env bash
# The GPU backend's benchmark on a machine with a real GPU (the H200 runs of bench/README.md, "WebGPU on an
# NVIDIA H200"): Qwen2.5-0.5B-shaped random-weight Q4_0 and Q4_K_M files, made on the machine itself, through
# `sotto bench llm --backend webgpu --timings` (Dawn's Vulkan backend on the vendor driver): decode tokens/s,
# prefill of 64 / 256 tokens, dispatches per token, each op's GPU time from timestamp queries and the matrix x
# vector ops' GB/s against a measured copy bandwidth (the best of several compute-shader copies), the fused
# plan's decode next to the separate dispatches', `sotto_gpu_probe` (the grid barrier's cost) and
# `sotto_gpu_probe --bandwidth` (copies and reads several ways, then each weight type's
# matrix x vector alone at Qwen2.5-0.5B's and Llama-3-8B's shapes, out of the last-level cache).
#
#   bench/gpu_native.sh [BIN_DIR] [OUT_DIR]
#
# `--fusion auto` (the default, the first runs below) chooses the hand-written layer kernels by rule on a GPU
# (all layers in one dispatch); they are also measured on their own (--fusion layers).
#
# BIN_DIR holds sotto, sotto_make_random_gguf, libwebgpu_wrapper.so and ggml-vocab-qwen2.gguf (default
# .gpubench, which the device runs carry); results go to OUT_DIR (default $OUT, else /tmp). On the device
# machines the Vulkan loader is carried as .gl/*.deb (see /work/.library/device/README.md) and the NVIDIA ICD
# is named with VK_DRIVER_FILES.
set -euo pipefail
bin=${1:-.gpubench}
out=${2:-${OUT:-/tmp}}
. "$(dirname "${BASH_SOURCE[0]}")/gpu_device_env.sh"
case $bin in /*) bin_abs=$bin ;; *) bin_abs=$PWD/$bin ;; esac  # BIN_DIR relative to here, or absolute
export SOTTO_DAWN_LIBRARY=${SOTTO_DAWN_LIBRARY:-$bin_abs/libwebgpu_wrapper.so}
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
models=/tmp/sotto-gpu-models
mkdir -p "$models"
for type in q4_0 q4_k_m; do
  [ -f "$models/qwen2.5-0.5b-random-$type.gguf" ] ||
    "$bin/sotto_make_random_gguf" --type "$type" --out "$models" --vocab "$bin/ggml-vocab-qwen2.gguf" --threads "$(nproc)"
done
"$bin/sotto_gpu_probe" --bandwidth 2>&1 | tee "$out/gpu_bandwidth.txt"  # the reference bandwidth; matvecs alone
"$bin/sotto_gpu_probe" 2>&1 | tee "$out/gpu_probe.txt"  # the grid barrier's cost, plain vs atomic loads
# A synthetic token as one persistent dispatch: what a hand-written kernel could reach (about 10 s).
"$bin/sotto_gpu_probe" --token 2>&1 | tee -a "$out/gpu_probe.txt"
for type in q4_0 q4_k_m; do
  file="$models/qwen2.5-0.5b-random-$type.gguf"
  # The default (--fusion auto: the layer kernels by rule on a GPU), then --fusion on: decode
  # measured both through the rewritten fused plan (one dispatch per layer) and the separate dispatches.
  "$bin/sotto" bench llm --backend webgpu -m "$file" --repeats 5 2>&1 | tee "$out/gpu_bench_$type.txt"
  "$bin/sotto" bench llm --backend webgpu -m "$file" --repeats 5 --fusion on 2>&1 | tee -a "$out/gpu_bench_$type.txt"
  "$bin/sotto" bench llm --backend webgpu -m "$file" --repeats 1 --timings --fusion off 2>&1 |
    tee -a "$out/gpu_bench_$type.txt"
done
# The hand-written layer kernels (src/models/llm/gpu/layer_kernel.h; attention sums in f32), both files, after 16 and
# 1,024 prompt tokens, all layers in one dispatch and one a dispatch (bench/results/history-2026-12-03.md).
for type in q4_0 q4_k_m; do
  for args in "--depth 16" "--depth 1024" "--depth 16 --layers-per-dispatch 1"; do
    # shellcheck disable=SC2086
    "$bin/sotto" bench llm --backend webgpu -m "$models/qwen2.5-0.5b-random-$type.gguf" --repeats 5 --attention f32 \
      --fusion layers $args 2>&1 | tee -a "$out/gpu_layer_kernels.txt"
  done
done
# Attention's sum of values: f16 key by key (the CPU's bits, the default) against f32 a chunk of keys at a
# time, its keys split over many workgroups per head, decoding after a short and long prompts
# (models/llm/gpu/llm_gpu.h AttentionSum).
q4_0="$models/qwen2.5-0.5b-random-q4_0.gguf"
for depth in 16 1024 4096; do
  for sum in f16 f32; do
    "$bin/sotto" bench llm --backend webgpu -m "$q4_0" --repeats 3 --fusion on --attention "$sum" --depth "$depth" 2>&1 |
      tee -a "$out/gpu_attention_q4_0.txt"
  done
done
"$bin/sotto" bench llm --backend webgpu -m "$q4_0" --repeats 1 --timings --fusion off --attention f32 2>&1 | tee -a "$out/gpu_attention_q4_0.txt"
"$bin/sotto" bench llm --backend webgpu -m "$q4_0" --repeats 1 --timings --fusion off --attention f32 --depth 1024 2>&1 |
  tee -a "$out/gpu_attention_q4_0.txt"
# Every kernel against the CPU on this GPU (the split attention's arrival counting among them).
"$bin/sotto" gpu-check 2>&1 | tee "$out/gpu_check.txt" | grep -Ev '^ok' || true
