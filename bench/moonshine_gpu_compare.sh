#!/usr/bin/env bash
# Moonshine base on WebGPU, this build against an earlier one, on the same machine in one call: bench/moonshine_gpu.sh
# with BIN_DIR's sotto (same texts as the CPU backend on every clip, beckett.wav timings, the GPU profile), then
# BASE_DIR's sotto on beckett.wav (the op-by-op decoder step), then sotto_tests' GPU checks on the real GPU.
#
#   bench/moonshine_gpu_compare.sh BIN_DIR BASE_DIR MODEL_DIR [OUT_DIR] [REPEATS] [OTHER_DIR]
#
# BIN_DIR: sotto and sotto_tests (built with -static-libstdc++ -static-libgcc) and libwebgpu_wrapper.so (npm
# bun-webgpu-linux-x64); BASE_DIR: the earlier sotto with the libstdc++.so.6 / libgcc_s.so.1 it was linked
# against; OTHER_DIR: a third sotto (static) timed the same way; MODEL_DIR: models/moonshine-base-en. SOTTO_BUILT_IN: the source directory sotto_tests was built in
# (linked to this checkout, its models/ to MODEL_DIR's parent, where they do not exist).
set -uo pipefail
bin=$1
base=$2
models=$3
out=${4:-${OUT:-/tmp}}
repeats=${5:-20}
case $bin in /*) ;; *) bin=$PWD/$bin ;; esac
case $base in /*) ;; *) base=$PWD/$base ;; esac
nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$nvidia_icd" ]; then export VK_DRIVER_FILES=$nvidia_icd; fi
export SOTTO_DAWN_LIBRARY=$bin/libwebgpu_wrapper.so
status=0
bash bench/moonshine_gpu.sh "$bin" "$models" "$out" "$repeats" 2>&1 | tee "$out/moonshine_gpu.txt" || status=1
echo "earlier build ($base/sotto), beckett.wav (10 s), --backend webgpu, $repeats runs:"
LD_LIBRARY_PATH=$base "$base/sotto" transcribe -m "$models" tests/fixtures/audio/beckett.wav --backend webgpu \
  --repeats "$repeats" --json 2>&1 | tee "$out/beckett_base.txt"
if [ -n "${6:-}" ]; then
  echo "other build ($6/sotto), beckett.wav (10 s), --backend webgpu, $repeats runs:"
  "$6/sotto" transcribe -m "$models" tests/fixtures/audio/beckett.wav --backend webgpu --repeats "$repeats" \
    --json 2>&1 | tee "$out/beckett_other.txt"
fi
src=${SOTTO_BUILT_IN:-}
if [ -n "$src" ] && [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; fi
[ -e models/moonshine-base-en ] || { mkdir -p models && ln -s "$models" models/moonshine-base-en; }
"$bin/sotto_tests" --gtest_filter='NnFused.*:NnGpu.*:MoonshineGpu.*' 2>&1 | tee "$out/gpu_tests.txt" || status=1
exit $status
