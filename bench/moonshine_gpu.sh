#!/usr/bin/env bash
# Moonshine base on WebGPU (Dawn's Vulkan backend on the vendor driver) against our CPU backend on the same
# machine: every WAV clip in tests/fixtures/audio transcribed by both (the texts must be equal), then the 10 s
# clip (beckett.wav) R times each, the median run's encode / decode / total ms (the first run also compiles the
# GPU pipelines, so R >= 3).
#
#   bench/moonshine_gpu.sh BIN_DIR MODEL_DIR [OUT_DIR] [REPEATS]
#
# BIN_DIR holds sotto (built with -static-libstdc++ -static-libgcc) and libwebgpu_wrapper.so (npm
# bun-webgpu-linux-x64); MODEL_DIR is models/moonshine-base-en. On the device machines the Vulkan loader is
# carried as .gl/*.deb (see /work/.library/device/README.md) and the NVIDIA ICD is named with VK_DRIVER_FILES.
set -euo pipefail
bin=$1
models=$2
out=${3:-${OUT:-/tmp}}
repeats=${4:-20}
. "$(dirname "${BASH_SOURCE[0]}")/gpu_device_env.sh"
export SOTTO_DAWN_LIBRARY=${SOTTO_DAWN_LIBRARY:-$bin/libwebgpu_wrapper.so}
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
threads=$(nproc)
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $threads threads"
status=0
for clip in tests/fixtures/audio/*.wav; do
  name=$(basename "$clip" .wav)
  "$bin/sotto" transcribe -m "$models" "$clip" --backend webgpu --json >"$out/$name.webgpu.json"
  "$bin/sotto" transcribe -m "$models" "$clip" --backend cpu --threads "$threads" --json >"$out/$name.cpu.json"
  g=$(sed 's/.*"text":"\([^"]*\)".*/\1/' "$out/$name.webgpu.json")
  c=$(sed 's/.*"text":"\([^"]*\)".*/\1/' "$out/$name.cpu.json")
  if [ "$g" == "$c" ]; then echo "$name: same text on webgpu and cpu: $g"; else
    echo "$name: TEXTS DIFFER"; echo "  webgpu: $g"; echo "  cpu:    $c"; status=1
  fi
done
for backend in webgpu cpu; do
  echo "beckett.wav (10 s), --backend $backend, $repeats runs:"
  "$bin/sotto" transcribe -m "$models" tests/fixtures/audio/beckett.wav --backend "$backend" --threads "$threads" \
    --repeats "$repeats" --json
done 2>&1 | tee "$out/beckett_timings.txt"
# Where the GPU's time goes: each kernel's dispatches and GPU time (timestamp queries) over 3 runs.
"$bin/sotto" transcribe -m "$models" tests/fixtures/audio/beckett.wav --backend webgpu --repeats 3 --gpu-profile \
  2>&1 | tee "$out/beckett_profile.txt"
exit $status
