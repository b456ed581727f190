#!/usr/bin/env bash
# A bad command line and --help under mpirun: the command line is parsed before MPI starts,
# and only the launcher's rank 0 speaks, so the error and the help appear once, and the job
# ends with 64 (help: 0).
#   said_once_under_mpirun.sh MPIEXEC... PROGRAM   (the command line that runs PROGRAM on 3 ranks)
set -uo pipefail
failures=0
check() {  # what, expected status, pattern that must appear exactly once, arguments...
  local what=$1 expected=$2 pattern=$3
  shift 3
  local out status count
  out=$("${command[@]}" "$@" 2>&1)
  status=$?
  count=$(grep -c -- "$pattern" <<<"$out")
  if [[ $status -ne $expected || $count -ne 1 ]]; then
    echo "FAIL $what: exit status $status (expected $expected), \"$pattern\" said $count times (expected once)"
    sed 's/^/  /' <<<"$out" | head -20
    failures=$((failures + 1))
  else
    echo "ok   $what: exit status $status, said once"
  fi
}
command=("$@")
check "a word for --epochs" 64 "--epochs: 'ten' is not a whole number" --epochs ten
check "an unknown flag" 64 "The following arguments were not expected" --no-such-flag 1
check "--help" 0 "^Usage:" --help
exit $((failures > 0))
