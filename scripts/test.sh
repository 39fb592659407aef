#!/usr/bin/env bash
# Runs every test sotto has, in order of cost, and prints one summary line at the end:
#   format check · native Release unit/model tests (ctest) · WebAssembly build · Node and headless-Chromium
#   tests · ASan+UBSan tests · TSan tests · every libFuzzer target (built with the ASan tests, one build
#   instead of two) for FUZZ_SECONDS (default 60) each.
# Usage: bash scripts/test.sh [--quick]   (--quick: skip sanitizers and fuzzing)
# Each stage's log is kept in build/test-logs/.
set -uo pipefail
cd "$(dirname "$0")/.."
QUICK=0; [ "${1:-}" = "--quick" ] && QUICK=1
JOBS=${JOBS:-$(nproc)}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
LOGS=build/test-logs
mkdir -p "$LOGS"

passed=0; failed=0; skipped=0; failed_stages=()
t_start=$(date +%s)

stage() {  # stage NAME COMMAND... : runs, logs, and counts one stage
  local name=$1; shift
  local t0; t0=$(date +%s)
  echo "== $name"
  if "$@" >"$LOGS/$name.log" 2>&1; then
    echo "   ok ($(( $(date +%s) - t0 )) s)"
    return 0
  else
    echo "   FAILED ($(( $(date +%s) - t0 )) s); last lines of $LOGS/$name.log:"
    tail -n 40 "$LOGS/$name.log" | sed 's/^/   | /'
    # node:test prints each failure as "not ok N - name" and its error below; the tail above may not reach it.
    if grep -Eq '^ *not ok ' "$LOGS/$name.log"; then
      echo "   failures in $LOGS/$name.log:"
      grep -E -A 30 '^ *not ok ' "$LOGS/$name.log" | head -n 200 | sed 's/^/   ! /'
    fi
    failed_stages+=("$name")
    return 1
  fi
}

# Adds the pass/fail counts a runner printed to the totals (ctest and node:test formats).
count_tests() {  # count_tests STAGE_EXIT_CODE LOG
  local rc=$1 log=$2 p f s
  if grep -q "tests passed" "$log"; then
    # ctest: "100% tests passed, 0 tests failed out of 57"
    f=$(grep -Eo "[0-9]+ tests failed out of [0-9]+" "$log" | tail -1 | awk '{print $1}')
    local total; total=$(grep -Eo "out of [0-9]+" "$log" | tail -1 | awk '{print $3}')
    # ctest counts a skipped test (GTEST_SKIP: the GPU tests under the sanitizers) as not failed.
    s=$(grep -c '\*\*\*Skipped' "$log")
    p=$(( total - f - s ))
  else
    p=$(grep -E "^# pass [0-9]+" "$log" | awk '{s+=$3} END {print s+0}')
    f=$(grep -E "^# fail [0-9]+" "$log" | awk '{s+=$3} END {print s+0}')
    s=$(grep -E "^# skipped [0-9]+" "$log" | awk '{s+=$3} END {print s+0}')
  fi
  p=${p:-0}; f=${f:-0}
  # A stage that failed before its runner reported (a build error) counts as one failure.
  if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + ${s:-0}))
}
count_stage() {  # for stages that are one check each (format, fuzz targets)
  if [ "$1" = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}

format_check() {
  local files; files=$(git ls-files '*.cpp' '*.h' | grep -v '^tests/fuzz/corpus/')
  # shellcheck disable=SC2086
  clang-format-19 --dry-run --Werror $files
}
native_tests() {
  cmake --preset release && cmake --build --preset release -j "$JOBS" && moonshine_onnx_layout &&
    ctest --preset release -j "$JOBS"
}
# The hub's ONNX layout of Moonshine, made from the package's files (and checked against them in ONNX Runtime),
# which the native and Node tests load (build/moonshine-onnx).
moonshine_onnx_layout() {
  [ ! -f models/moonshine-base-en/encoder_model.ort ] && return 0
  python3 tools/moonshine/ort_to_onnx.py models/moonshine-base-en build/moonshine-onnx --check
}
wasm_build() {
  for v in wasm-simd128 wasm-relaxed; do
    cmake --preset "$v" && cmake --build --preset "$v" -j "$JOBS" || return 1
  done
  ls -l build/wasm-*/sotto.wasm
}
web_tests() { node --test tests/web/; }
sanitizer_tests() {  # asan | tsan
  cmake --preset "$1" && cmake --build --preset "$1" -j "$JOBS" && ctest --preset "$1" -j "$JOBS"
}
fuzz_one() {  # fuzz_one TARGET: runs it for FUZZ_SECONDS on a scratch copy of its seed corpus
  local target=$1 name=${1#fuzz_}
  local corpus=build-asan/fuzz-corpus/$name
  rm -rf "$corpus"; mkdir -p "$corpus" build-asan/fuzz-artifacts
  [ -d "tests/fuzz/corpus/$name" ] && cp -r "tests/fuzz/corpus/$name/." "$corpus/"
  "build-asan/bin/$target" -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix=build-asan/fuzz-artifacts/ -print_final_stats=1 "$corpus"
}

stage format format_check; count_stage $?
stage native native_tests; count_tests $? "$LOGS/native.log"
stage wasm wasm_build; count_stage $?
if [ -f build/wasm-simd128/sotto.wasm ]; then
  stage web web_tests; count_tests $? "$LOGS/web.log"
fi
if [ "$QUICK" = 0 ]; then
  stage asan sanitizer_tests asan; count_tests $? "$LOGS/asan.log"
  stage tsan sanitizer_tests tsan; count_tests $? "$LOGS/tsan.log"
  # The fuzz targets come from the ASan build above.
  if compgen -G "build-asan/bin/fuzz_*" >/dev/null; then
    # Each fuzzer is one process on one core: JOBS of them at a time, each still FUZZ_SECONDS.
    targets=()
    for bin in build-asan/bin/fuzz_*; do targets+=("$(basename "$bin")"); done
    for ((i = 0; i < ${#targets[@]}; i += JOBS)); do
      batch=("${targets[@]:i:JOBS}")
      for t in "${batch[@]}"; do stage "$t" fuzz_one "$t" >"$LOGS/$t.stage" 2>&1 & done
      wait
      for t in "${batch[@]}"; do
        cat "$LOGS/$t.stage"
        grep -q '^   ok' "$LOGS/$t.stage"; rc=$?
        count_stage $rc
        [ $rc = 0 ] || failed_stages+=("$t")
        echo "   $(grep -E 'stat::number_of_executed_units' "$LOGS/$t.log" | awk '{print $2}') executions"
      done
    done
  else
    echo "== fuzz: no targets in build-asan/bin (the ASan build failed)"
    count_stage 1; failed_stages+=(fuzz)
  fi
fi

echo "== done in $(( $(date +%s) - t_start )) s"
[ ${#failed_stages[@]} -gt 0 ] && echo "failed stages: ${failed_stages[*]}"
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ ${#failed_stages[@]} -eq 0 ] && [ "$failed" -eq 0 ]
