#!/usr/bin/env bash
# The main job: set up (first run only), build, show what the engine reads in the bundled model, and serve the
# lab page (WebAssembly engine on Web Workers, threaded SIMD self-test, model-file inspector).
# Usage: bash scripts/run.sh [PORT]
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${1:-${PORT:-8080}}
bash scripts/setup.sh
bash scripts/build.sh
MODEL=../shared/fixtures/llm/stories260K-q4_0.gguf
if [ -f "$MODEL" ]; then
  echo; echo "== build/bin/sotto info $MODEL"; build/bin/sotto info "$MODEL" | head -n 40 || true; echo "..."  # head closes the pipe early
fi
echo
echo "== lab page: open http://localhost:$PORT/web/lab/ (Ctrl-C stops the server)"
exec node web/serve.mjs "$PORT"
