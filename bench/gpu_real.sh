#!/usr/bin/env bash
# The real models (scripts/get-models.sh) on a GPU machine without network (the H200 runs of bench/README.md,
# "Real models on the H200"): each model arrives in pieces over several device calls (the device carries at
# most 64 MiB per call: `split -b 60000000 -d` pieces named MODEL.partNN, one folder .mcNN per call, which a
# warm machine keeps), is put together and checked against the sha256 recorded in scripts/get-models.sh; then
# bench/gpu_real_check.py holds the WebGPU and the CPU backend's greedy tokens against llama.cpp's recorded
# ones (bench/data/real_reference.json) and `sotto bench llm --backend webgpu --timings` measures each file.
#
#   bench/gpu_real.sh [BIN_DIR] [OUT_DIR]      (BIN_DIR as for bench/gpu_native.sh, default .gpubench)
set -euo pipefail
bin=${1:-.gpubench}
out=${2:-${OUT:-/tmp}}
. "$(dirname "${BASH_SOURCE[0]}")/gpu_device_env.sh"
case $bin in /*) bin_abs=$bin ;; *) bin_abs=$PWD/$bin ;; esac  # BIN_DIR relative to here, or absolute
export SOTTO_DAWN_LIBRARY=${SOTTO_DAWN_LIBRARY:-$bin_abs/libwebgpu_wrapper.so}
models=/tmp/sotto-real-models
mkdir -p "$models"
found=()
for name in gemma-3-270m-q4_k_m.gguf qwen2.5-coder-0.5b-instruct-q4_k_m.gguf; do
  # The recorded sha256 is the word after the name in scripts/get-models.sh.
  want=$(grep -A1 "^[A-Z]*=($name" scripts/get-models.sh | tail -1 | awk '{print $1}')
  pieces=$(ls ${SOTTO_PIECES:-.mc*}/"$name".part* 2>/dev/null | awk -F/ '{print $NF " " $0}' | sort | cut -d' ' -f2 || true)
  if [ -z "$pieces" ]; then echo "$name: no pieces here, skipped"; continue; fi
  # shellcheck disable=SC2086
  cat $pieces >"$models/$name"
  got=$(sha256sum "$models/$name" | cut -d' ' -f1)
  if [ "$got" != "$want" ]; then echo "$name: sha256 $got, want $want (a piece is missing?)"; exit 1; fi
  echo "$name: $(stat -c %s "$models/$name") bytes, sha256 ok"
  found+=("$name")
done
python3 bench/gpu_real_check.py --sotto "$bin/sotto" --models "$models" --threads "$(nproc)" 2>&1 | tee "$out/gpu_real_check.txt"
for name in "${found[@]}"; do
  "$bin/sotto" bench llm --backend webgpu -m "$models/$name" --repeats 5 --timings 2>&1 | tee -a "$out/gpu_real_bench.txt"
done
