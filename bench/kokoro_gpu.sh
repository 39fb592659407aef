#!/usr/bin/env bash
# Kokoro-82M on WebGPU (Dawn's Vulkan backend on the vendor driver) against our CPU backend on the same machine:
# one ~5 s sentence (77 phoneme ids, af_heart), R runs each, the median compute_ms (load and the warm-up pass,
# which compiles the GPU pipelines, are outside it) and real-time factor; the two backends' lengths compared;
# then on the GPU a different sentence spoken after the first (a conversation's later sentences).
#
#   bench/kokoro_gpu.sh BIN_DIR MODEL [OUT_DIR] [REPEATS]
#
# BIN_DIR holds sotto (built with -static-libstdc++ -static-libgcc) and libwebgpu_wrapper.so (npm
# bun-webgpu-linux-x64); MODEL is kokoro-v1.0.int8.onnx with voices/af_heart.bin beside it. On the device machines
# the Vulkan loader is carried as a .deb (see /work/.library/device/README.md) and the NVIDIA ICD is named with
# VK_DRIVER_FILES.
set -uo pipefail
bin=$1
model=$2
out=${3:-${OUT:-/tmp}}
repeats=${4:-5}
. "$(dirname "${BASH_SOURCE[0]}")/gpu_device_env.sh"
export SOTTO_DAWN_LIBRARY=${SOTTO_DAWN_LIBRARY:-$bin/libwebgpu_wrapper.so}
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
threads=$(nproc)
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $threads threads"
phonemes='həlˈoʊ wˈɜːld, ðɪs ɪz ɐ tˈɛst ʌv ðə spˈiʧ sˈɪstəm, ɹˈʌnɪŋ ˈɔn ɪts ˈOn ˈɛnʤən.'
status=0
for backend in webgpu cpu; do
  for r in $(seq 1 "$repeats"); do
    if ! timeout 240 "$bin/sotto" speak -m "$model" --voice af_heart --phonemes "$phonemes" --backend "$backend" \
      --threads "$threads" -o "$out/kokoro_$backend.wav" --json >"$out/kokoro_${backend}_$r.json" 2>"$out/err.txt"; then
      echo "$backend run $r failed: $(cat "$out/err.txt")"
      status=1
      break
    fi
    echo "$backend run $r: $(cat "$out/kokoro_${backend}_$r.json")"
  done
  ms=$(cat "$out"/kokoro_"${backend}"_*.json 2>/dev/null | sed -n 's/.*"compute_ms":\([0-9.]*\).*/\1/p' | sort -n)
  n=$(echo "$ms" | grep -c .)
  if [ "$n" -gt 0 ]; then
    median=$(echo "$ms" | sed -n "$(((n + 1) / 2))p")
    audio=$(sed -n 's/.*"audio_s":\([0-9.]*\).*/\1/p' "$out/kokoro_${backend}_1.json")
    echo "$backend: median compute $median ms over $n runs for $audio s of audio: $(awk "BEGIN{printf \"%.1f\", $audio * 1000 / $median}")x real time"
  fi
done
# A different sentence after the first (Q, ~5 s): what every later sentence of a conversation costs. Its time is
# compute_ms - first_audio_ms of one speak of both; then both spoken again (--repeats 2: passes_ms[1]).
Q='ðˌɪs ɪz ɐ dˈɪfəɹənt sˈɛntᵊns, wˌɪʧ ʃˌʊd tˈAk əbˈWt ðə sˈAm tˈIm tə spˈik ˈWt lˈWd.'
timeout 240 "$bin/sotto" speak -m "$model" --voice af_heart --phonemes "$Q" --backend webgpu -o "$out/q.wav" --json \
  >"$out/kokoro_q.json" 2>"$out/err.txt" || status=1
qs=$(sed -n 's/.*"audio_s":\([0-9.]*\).*/\1/p' "$out/kokoro_q.json")
for r in $(seq 1 "$repeats"); do
  timeout 240 "$bin/sotto" speak -m "$model" --voice af_heart --phonemes "$phonemes $Q" --backend webgpu \
    -o "$out/pq.wav" --json --repeats 2 >"$out/kokoro_pq_$r.json" 2>"$out/err.txt" || { status=1; break; }
  sed -n 's/.*"compute_ms":\([0-9.]*\),"first_audio_ms":\([0-9.]*\).*"passes_ms":\[[0-9.]*,\([0-9.]*\)\].*/\1 \2 \3/p' \
    "$out/kokoro_pq_$r.json" | awk '{ printf "%.2f %.2f\n", $1 - $2, $3 }'
done >"$out/kokoro_pq.txt"
n=$(grep -c . "$out/kokoro_pq.txt")
if [ "$n" -gt 0 ]; then
  q=$(cut -d' ' -f1 "$out/kokoro_pq.txt" | sort -n | sed -n "$(((n + 1) / 2))p")
  again=$(cut -d' ' -f2 "$out/kokoro_pq.txt" | sort -n | sed -n "$(((n + 1) / 2))p")
  echo "webgpu: a different sentence (${qs:-?} s) after the first: median $q ms over $n runs," \
    "$(awk "BEGIN{printf \"%.1f\", ${qs:-0} * 1000 / $q}")x real time; both spoken again: $again ms"
fi
g=$(sed -n 's/.*"samples":\([0-9]*\).*/\1/p' "$out/kokoro_webgpu_1.json" 2>/dev/null)
c=$(sed -n 's/.*"samples":\([0-9]*\).*/\1/p' "$out/kokoro_cpu_1.json" 2>/dev/null)
echo "samples: webgpu ${g:-none}, cpu ${c:-none}"
exit $status
