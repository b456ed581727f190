#!/usr/bin/env bash
# one_line_per_job.sh <status> <program-name> <command...>: the command (a job under mpiexec)
# ends with exit status <status> (a regular expression: "64|1" where ranks end differently), and its output holds exactly one line of the program's own,
# "<program-name> (rank R): ...", whatever the number of ranks (strata::run_main); or
# $STRATA_EXPECTED_LINES lines where set (ranks that met different kinds of error).
set -uo pipefail
expected=$1 program=$2
shift 2
output=$("$@" 2>&1)
status=$?
lines=$(grep -cE "^${program} \(rank [0-9]+\): " <<<"$output")
echo "$output"
echo "exit status ${status}, ${lines} line(s) from ${program}"
[[ $status =~ ^(${expected})$ ]] || { echo "FAIL: expected exit status ${expected}"; exit 1; }
expected_lines=${STRATA_EXPECTED_LINES:-1}
[[ $lines == "$expected_lines" ]] || { echo "FAIL: expected ${expected_lines} line(s) from ${program}"; exit 1; }
