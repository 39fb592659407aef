#!/usr/bin/env bash
# Builds build/bin/llama_capi (bench/llama_capi.cpp): llama.cpp's C API over node-llama-cpp's prebuilt CPU
# libraries, the peer of the LLM benchmarks. The headers come from the llama.cpp source node-llama-cpp ships
# (node_modules/node-llama-cpp/llama/gitRelease.bundle, the same release as the prebuilt binaries); nothing is
# downloaded. Not part of the product build or of CI.
#
#   bash bench/build_llama_capi.sh [BINS_DIR]     (default: node_modules/@node-llama-cpp/linux-x64/bins/linux-x64)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BINS="$(realpath "${1:-$ROOT/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64}")"
BUNDLE="$ROOT/node_modules/node-llama-cpp/llama/gitRelease.bundle"
WORK="$ROOT/build/llama_capi"
[ -f "$BINS/libllama.v0.4.0.so" ] || { echo "no libllama.v0.4.0.so in $BINS (npm ci first)" >&2; exit 1; }
[ -f "$BUNDLE" ] || { echo "no $BUNDLE (npm ci first)" >&2; exit 1; }
mkdir -p "$WORK" "$ROOT/build/bin"
if [ ! -f "$WORK/include/llama.h" ]; then
  rm -rf "$WORK/src.git" "$WORK/include"
  git init -q --bare "$WORK/src.git"
  git --git-dir="$WORK/src.git" fetch -q "$BUNDLE" HEAD
  mkdir -p "$WORK/include"
  git --git-dir="$WORK/src.git" archive FETCH_HEAD include/llama.h ggml/include | tar -x -C "$WORK"
  cp "$WORK"/ggml/include/*.h "$WORK/include/"
fi
${CXX:-g++} -std=c++17 -O2 -Wall -Wextra -I"$WORK/include" -DLLAMA_CAPI_BACKENDS="\"$BINS\"" "$ROOT/bench/llama_capi.cpp" \
  -L"$BINS" -l:libllama.v0.4.0.so -l:libggml.v0.4.0.so -l:libggml-base.so -Wl,-rpath,"$BINS" \
  -o "$ROOT/build/bin/llama_capi"
echo "built $ROOT/build/bin/llama_capi (libraries and CPU variants: $BINS)"
