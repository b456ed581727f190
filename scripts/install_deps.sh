#!/usr/bin/env bash
# Installs strata's build and run dependencies from Debian's packages.
set -euo pipefail
packages=(
  g++ cmake ninja-build pkg-config
  libboost-dev libfmt-dev librange-v3-dev catch2 libcli11-dev
  openmpi-bin libopenmpi-dev
  zlib1g-dev libopenblas-dev
  dataset-fashion-mnist
  clang libclang-rt-14-dev   # the fuzzers (scripts/sanitizers.sh)
)
sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${packages[@]}"
