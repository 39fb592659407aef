#!/usr/bin/env bash
# The GPU f32 product plans against each other on one GPU (Dawn's Vulkan backend, e.g. an H100 or H200): the
# rule's plan ("auto") and the tall kernel in each of the shapes given, first alone at the speech models' shapes
# (sotto_gpu_linear_bench), then in Parakeet's whole transcription, rounds alternating the plans, then one
# profile of each plan with precise timestamps.
#
#   bench/gpu_linear_sweep.sh BIN_DIR PARAKEET_DIR CLIP.wav [OUT_DIR]
#
# BIN_DIR holds sotto, sotto_gpu_linear_bench (built with -static-libstdc++ -static-libgcc on the device
# machines) and libwebgpu_wrapper.so. PARAKEET_DIR: e.g. tools/parakeet_random_weights.py --size v2. CLIP: the
# first 6 s of beckett.wav for the issue's figure. PLANS (default "auto 8,3,8,264 16,1,16,264 8,2,16,132"): "auto"
# or SOTTO_GPU_LINEAR_TALL's "CT,S,KS,TARGET" (columns / 4, slices of K, ks a slice, split-K workgroup target).
set -euo pipefail
bin=$1 model=$2 clip=$3 out=${4:-${OUT:-/tmp}}
. "$(dirname "${BASH_SOURCE[0]}")/gpu_device_env.sh"
case $bin in /*) ;; *) bin=$PWD/$bin ;; esac
export SOTTO_DAWN_LIBRARY=${SOTTO_DAWN_LIBRARY:-$bin/libwebgpu_wrapper.so}
plans=${PLANS:-"auto 8,3,8,264 16,1,16,264 8,2,16,132"}
with_plan() {  # with_plan PLAN COMMAND...
  local plan=$1
  shift
  if [ "$plan" = auto ]; then "$@"; else SOTTO_GPU_LINEAR_KERNEL=tall SOTTO_GPU_LINEAR_TALL=$plan "$@"; fi
}
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
for plan in $plans; do
  echo "== products, plan $plan"
  with_plan "$plan" "$bin/sotto_gpu_linear_bench" 9
done 2>&1 | tee "$out/linear_sweep.txt"
for round in 1 2; do
  for plan in $plans; do
    echo "== parakeet, plan $plan, round $round"
    with_plan "$plan" "$bin/sotto" transcribe -m "$model" "$clip" --backend webgpu --threads 8 --repeats 21 --json
  done
done 2>&1 | grep -v '^{' | tee "$out/parakeet_sweep.txt"
for plan in $plans; do
  echo "== profile, plan $plan"
  SOTTO_DAWN_TOGGLES=-timestamp_quantization with_plan "$plan" "$bin/sotto" transcribe -m "$model" "$clip" \
    --backend webgpu --threads 8 --repeats 3 --gpu-profile
done 2>&1 | grep -v '^{' | tee "$out/parakeet_profile.txt"
