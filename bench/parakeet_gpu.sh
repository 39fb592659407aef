#!/usr/bin/env bash
# Parakeet TDT on WebGPU (Dawn's Vulkan backend on the vendor driver), e.g. on an NVIDIA H200: a v2-shaped
# random-weight model (tools/parakeet_random_weights.py, numpy only) made on the machine, then sotto_tests'
# ParakeetGpu.* (the conformer ops against their references on the real GPU, the CI model's encoder and tokens
# against the CPU backend, and ParakeetGpu.FullModelTiming: a 6 s clip's encoder and whole transcription,
# medians of 10 runs, the GPU's encoder output and tokens against the CPU backend's on all cores).
#
#   bench/parakeet_gpu.sh BIN_DIR [OUT_DIR]
#
# BIN_DIR holds sotto_tests (built with -static-libstdc++ -static-libgcc) and libwebgpu_wrapper.so (npm
# bun-webgpu-linux-x64). sotto_tests reads its test data under the source directory it was built in: where that
# path (SOTTO_BUILT_IN) does not exist (the device machines), it is linked to this checkout. The Vulkan loader is carried as
# .gl/*.deb (see /work/.library/device/README.md) and the NVIDIA ICD is named with VK_DRIVER_FILES.
set -euo pipefail
bin=$1
out=${2:-${OUT:-/tmp}}
. "$(dirname "${BASH_SOURCE[0]}")/gpu_device_env.sh"
case $bin in /*) ;; *) bin=$PWD/$bin ;; esac
export SOTTO_DAWN_LIBRARY=${SOTTO_DAWN_LIBRARY:-$bin/libwebgpu_wrapper.so}
src=${SOTTO_BUILT_IN:-}  # the source directory sotto_tests was built in, when it is not this checkout
if [ -n "$src" ] && [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
model=/tmp/parakeet_v2_random
[ -f "$model/model.safetensors" ] || python3 tools/parakeet_random_weights.py --size v2 --out "$model"
SOTTO_PARAKEET_GPU_DIR=$model SOTTO_PARAKEET_GPU_THREADS=$(nproc) \
  "$bin/sotto_tests" --gtest_filter='ParakeetGpu.*:NnGpu.*' 2>&1 | tee "$out/parakeet_gpu.txt"
