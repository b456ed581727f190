#!/usr/bin/env bash
# check_blas_kernels.sh <program>: the program multiplies matrices on more than OpenBLAS's
# generic SSE3 kernels ("Prescott") wherever the CPU has AVX2 and FMA, also on CPUs OpenBLAS
# does not know (blas.hpp). Exit 77 (skipped) on a CPU without them.
set -euo pipefail
program=$1
flags=$(grep -m1 '^flags' /proc/cpuinfo)
if ! grep -qw avx2 <<<"$flags" || ! grep -qw fma <<<"$flags"; then
  echo "skipped: this CPU has no AVX2 and FMA, so OpenBLAS's generic kernels are the right ones"
  exit 77
fi
# OPENBLAS_VERBOSE=2 makes OpenBLAS name its kernels each time it is loaded: the last is in use.
kernels=$(env -u OPENBLAS_CORETYPE OPENBLAS_VERBOSE=2 "$program" --help 2>&1 | grep -o "Core: [A-Za-z0-9]*" | tail -1)
echo "$(basename "$program"): OpenBLAS ${kernels:-named no kernels}"
[[ -n $kernels && $kernels != "Core: Prescott" ]]
