#!/usr/bin/env bash
# Installs strata's build and run dependencies from Debian's packages.
set -euo pipefail
packages=(
  g++ cmake ninja-build pkg-config
  libboost-dev libfmt-dev nlohmann-json3-dev librange-v3-dev catch2 libcli11-dev
  openmpi-bin libopenmpi-dev
  zlib1g-dev libopenblas-dev
  dataset-fashion-mnist
  libtorch-dev               # examples/libtorch
  python3-torch              # the PyTorch twins and DDP peers (/usr/bin/python3)
  python3-pip                # safetensors from PyPI, below
  iproute2                   # scripts/cluster.sh (the multihost tests)
  clang libclang-rt-14-dev   # the fuzzers (scripts/sanitizers.sh)
)
# Conan 2, for the package.conan_create test, comes from PyPI (Debian has no Conan 2), on a
# best-effort basis: where pip cannot install it, that one test reports itself skipped.
conan_2() { command -v conan >/dev/null && conan --version 2>/dev/null | grep -q "^Conan version 2\."; }
install_conan() {
  conan_2 && return 0
  python3 -m pip install --quiet 'conan>=2,<3' 2>/dev/null ||
    { echo "install_deps.sh: could not install Conan 2 with pip; package.conan_create will be skipped" >&2; return 0; }
  if command -v pyenv >/dev/null; then pyenv rehash; fi  # the conan command of a pyenv Python
}

# The safetensors package, for the tests of strata-ckpt's exports and imports, comes from PyPI
# into Debian's Python (Debian has no package of it), on a best-effort basis: where pip cannot
# install it, those tests report themselves skipped.
install_safetensors() {
  /usr/bin/python3 -c "import safetensors" 2>/dev/null && return 0
  /usr/bin/python3 -m pip install --quiet --break-system-packages safetensors 2>/dev/null ||
    echo "install_deps.sh: could not install safetensors with pip; the safetensors tests will be skipped" >&2
}

# --peers: also python3-torchvision, which the PyTorch DDP peers (../shared/peers) need for
# ResNet-50 and VGG-16. It brings ffmpeg's libraries along, which nothing else needs, so the
# tests and the demo do not install it.
if [ "${1:-}" = "--peers" ]; then packages+=(python3-torchvision); fi

# --if-missing: leave apt alone when every package is installed already (what test.sh and
# demo.sh ask, so that each stands on its own on a fresh machine without updating apt every run).
if [ "${1:-}" = "--if-missing" ]; then
  missing=0
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || { missing=1; break; }
  done
  if [ "$missing" = 0 ]; then install_conan; install_safetensors; exit 0; fi
  echo "install_deps.sh: installing missing packages" >&2
fi
sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${packages[@]}"
install_conan
install_safetensors
