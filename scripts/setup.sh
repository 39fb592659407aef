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

# Fixtures: real model files and audio live in ../shared/fixtures (see its SOURCES.md).
if [ ! -d ../shared/fixtures ]; then
  echo "setup: warning: ../shared/fixtures not found; fixture-based tests will fail" >&2
fi
echo "setup: done"
