#!/usr/bin/env bash
# Makes .deps/ (git-ignored), what a bare GPU machine lacks to build and run strata's GPU work
# and cannot fetch (it has no package registry): CLI11's headers, zlib's headers and the
# Fashion-MNIST files, taken from this machine's Debian packages (scripts/install_deps.sh
# installs them). About 31 MiB; it travels with the working tree (the device's carry list).
# Where a host build has the staged executor's GPU test (BUILD_DIR, default build), it goes
# to .deps/staged/ with the one library a bare GPU machine lacks (fmt): the `staged` phase of
# scripts/gpu_run.sh runs it there, without MPI, Boost or a second build.
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
staged_test="${BUILD_DIR:-build}/tests/gpu/staged_executor_tests"
if [[ -x $staged_test ]]; then
  mkdir -p "$deps/staged"
  cp "$staged_test" "$deps/staged/"
  # The libraries it needs beyond glibc, libstdc++, zlib and CUDA's runtime (there already).
  ldd "$staged_test" | awk '$3 ~ /^\// {print $3}' | grep -E "libfmt" | xargs -r -I{} cp -L {} "$deps/staged/"
else
  echo "gpu_deps.sh: no $staged_test (build it for the staged phase: cmake --build build --target staged_executor_tests)" >&2
fi
du -sh "$deps"
