#!/usr/bin/env bash
# Builds the native Release tree (build/bin/sotto, tests) and both WebAssembly variants.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
t0=$(date +%s)
cmake --preset release >/dev/null
cmake --build --preset release -j "$JOBS"
t1=$(date +%s)
for v in wasm-simd128 wasm-relaxed; do
  cmake --preset "$v" >/dev/null
  cmake --build --preset "$v" -j "$JOBS"
done
t2=$(date +%s)
echo "build: native $((t1 - t0)) s, wasm $((t2 - t1)) s"
ls -l build/wasm-simd128/sotto.wasm build/wasm-relaxed/sotto.wasm 2>/dev/null | awk '{print "build: " $NF ": " $5 " bytes"}'
