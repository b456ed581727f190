#!/usr/bin/env bash
# Makes .deps/ (git-ignored), what a bare GPU machine lacks to build and run strata's GPU work
# and cannot fetch (it has no package registry): CLI11's headers, zlib's headers and the
# Fashion-MNIST files, taken from this machine's Debian packages (scripts/install_deps.sh
# installs them). About 31 MiB; it travels with the working tree (the device's carry list).
#
#   scripts/gpu_deps.sh
set -euo pipefail
cd "$(dirname "$0")/.."
deps=.deps
for needed in /usr/include/CLI/CLI.hpp /usr/include/zlib.h /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz; do
  [[ -e $needed ]] || { echo "gpu_deps.sh: $needed is missing; run scripts/install_deps.sh first" >&2; exit 1; }
done
rm -rf "$deps"
mkdir -p "$deps/include" "$deps/fashion-mnist"
cp -r /usr/include/CLI "$deps/include/"
cp /usr/include/zlib.h /usr/include/zconf.h "$deps/include/"
cp /usr/share/datasets/fashion-mnist/*.gz "$deps/fashion-mnist/"
du -sh "$deps"
