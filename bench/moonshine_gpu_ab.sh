#!/usr/bin/env bash
# Two or more builds of sotto against each other on Moonshine base on one GPU (Dawn's Vulkan backend), e.g. main
# before and after a change to the decoder's step kernel: every fixture clip and each CLIP transcribed by every
# build on the GPU and by the first on the CPU (the texts must all be equal), then ROUNDS rounds of each CLIP,
# the builds in turn and back (A B B A), each run `--repeats 11` (the median run's encode / decode / total ms,
# and the token count), then each VARIANT (environment settings, e.g. SOTTO_MOONSHINE_STEP_SKIP=23) on the last
# build, then its per-kernel GPU profile on the last CLIP.
#
#   bench/moonshine_gpu_ab.sh MODEL_DIR "BIN_A BIN_B ..." CLIP.wav ...
#
# The last BIN is the one under study (variants and profile); REPEATS >= 2 (the medians are printed from 2).
# Each BIN is a sotto built with -static-libstdc++ -static-libgcc; SOTTO_DAWN_LIBRARY names
# libwebgpu_wrapper.so (npm bun-webgpu-linux-x64). ROUNDS (default 2), REPEATS (11), VARIANTS (none), THREADS
# (the CPU run's, default nproc), FIXTURES=0 (only the CLIPs' texts compared). The issue's clips: beckett.wav (14 tokens) and the first 10 s of
# tests/fixtures/audio/sample.wav (50 tokens, resampled from 24 kHz by sotto).
set -uo pipefail
models=$1
bins=($2)
shift 2
clips=("$@")
. "$(dirname "${BASH_SOURCE[0]}")/gpu_device_env.sh"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
text() { "$@" --json 2>/dev/null | sed 's/.*"text":"\([^"]*\)".*/\1/'; }
status=0
fixtures=(tests/fixtures/audio/*.wav)
[ "${FIXTURES:-1}" = 1 ] || fixtures=()
for clip in "${fixtures[@]}" "${clips[@]}"; do
  cpu=$(text "${bins[0]}" transcribe -m "$models" "$clip" --backend cpu --threads "${THREADS:-$(nproc)}")
  same=1
  for b in "${bins[@]}"; do
    g=$(text "$b" transcribe -m "$models" "$clip" --backend webgpu)
    [ "$g" == "$cpu" ] || { same=0; echo "  $b on the GPU: $g"; }
  done
  if [ $same = 1 ]; then echo "same text, $(basename "$clip"): $cpu"; else echo "TEXTS DIFFER, $(basename "$clip") (cpu: $cpu)"; status=1; fi
done
run() {  # run BIN CLIP [VAR=VALUE ...]
  local b=$1 clip=$2 out
  shift 2
  out=$(env "$@" "$b" transcribe -m "$models" "$clip" --backend webgpu --repeats "${REPEATS:-11}" --json 2>&1)
  local t n
  t=$(echo "$out" | grep -o '"tokens":\[[^]]*\]' | head -1)
  n=$(echo "$t" | tr -cd ',' | wc -c)
  [ "$t" = '"tokens":[]' ] || n=$((n + 1))
  echo "$(echo "$out" | grep -o 'median.*'), $n tokens"
}
order=("${bins[@]}")
for ((i = ${#bins[@]} - 1; i >= 0; i--)); do order+=("${bins[i]}"); done
for round in $(seq "${ROUNDS:-2}"); do
  for clip in "${clips[@]}"; do
    for b in "${order[@]}"; do echo "$b $(basename "$clip"): $(run "$b" "$clip" SOTTO_AB=1)"; done
  done
done
last=${bins[${#bins[@]} - 1]}
for v in ${VARIANTS:-}; do echo "$last $(basename "${clips[-1]}") $v: $(run "$last" "${clips[-1]}" "$v")"; done
"$last" transcribe -m "$models" "${clips[-1]}" --backend webgpu --repeats 3 --gpu-profile 2>&1 | grep -v '^{'
exit $status
