#!/usr/bin/env bash
# Builds everything and runs the whole test suite: static, compile-fail, unit (loopback),
# MPI (mpiexec -n 2 and -n 4), the examples' checks, benchmark smoke runs and the package test.
# Installs the Debian packages first if any is missing, so it needs nothing run before it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh --if-missing
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
