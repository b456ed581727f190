#!/usr/bin/env bash
# strata-launch's decision for every kind of ending, asserted: for each exit status of a job
# (a program that exits with it under mpirun), whether it is restarted, how many attempts
# run, and the status strata-launch ends with; and its own usage errors (64, no attempt).
#
#   launch_decisions.sh <strata-launch> [mpirun flags...]
set -uo pipefail
launcher=$1
shift
mpirun_args=()
for flag in "$@"; do mpirun_args+=(--mpirun-arg "$flag"); done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
check() {  # name, expected status, expected attempts, command...
  local name=$1 want_status=$2 want_attempts=$3
  shift 3
  "$@" >"$work/out" 2>&1
  local status=$? attempts
  attempts=$(grep -c "strata-launch: attempt [0-9]* of" "$work/out")
  if ((status != want_status || attempts != want_attempts)); then
    echo "FAIL $name: exit $status after $attempts attempts, expected $want_status after $want_attempts"
    sed 's/^/    /' "$work/out"
    failures=$((failures + 1))
  else
    echo "ok   $name: exit $status after $attempts attempt(s): $(grep "strata-launch: \(not restarting\|giving up\)" "$work/out" | head -1)"
  fi
}
job() { "$launcher" --np 1 --restarts 2 "${mpirun_args[@]}" -- bash -c "exit $1"; }
check "success" 0 1 job 0
check "a failure worth a restart (1)" 1 3 job 1
check "a killed rank (137)" 137 3 job 137
check "a usage error (64)" 64 1 job 64
check "a diverged model or no usable checkpoint (65)" 65 1 job 65
check "a checkpoint that cannot be written (74)" 74 1 job 74
# mpirun that cannot start the job for want of slots (without --oversubscribe): not retried
# on as many ranks, retried on fewer.
slots_args=()
for flag in "$@"; do [[ $flag == --oversubscribe ]] || slots_args+=(--mpirun-arg "$flag"); done
check "too few slots for every attempt" 1 1 "$launcher" --np 4096 --restarts 2 "${slots_args[@]}" -- true
check "too few slots, restarts on fewer ranks" 0 2 "$launcher" --np 4096 --restart-np 1 --restarts 2 "${slots_args[@]}" -- true
check "strata-launch: an unknown option" 64 0 "$launcher" --fast -- true
check "strata-launch: no program" 64 0 "$launcher" --np 2
check "strata-launch: a program that is not there" 64 0 "$launcher" --np 1 -- /nonexistent/trainer
check "strata-launch: --np not a number" 64 0 "$launcher" --np two -- true
check "strata-launch: --np without a value" 64 0 "$launcher" --np
check "strata-launch: --help" 0 0 "$launcher" --help
((failures == 0)) || exit 1
