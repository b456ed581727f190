#!/usr/bin/env bash
# STRATA_TIMELINE naming a device (/dev/full): said at start-up, nothing recorded, nothing
# made in /dev, and the run itself goes on.
#
#   timeline_on_a_device.sh <command line...>
set -uo pipefail
rm -f /dev/full.rank0.json /dev/full.rank1.json 2>/dev/null
out=$(STRATA_TIMELINE=/dev/full "$@" 2>&1)
status=$?
echo "$out"
((status == 0)) || { echo "FAIL: the run ended with $status"; exit 1; }
grep -q 'STRATA_TIMELINE: "/dev/full" is not a regular file .*; no timeline is recorded' <<<"$out" ||
  { echo "FAIL: nothing said of the timeline"; exit 1; }
[[ ! -e /dev/full.rank0.json && ! -e /dev/full.rank1.json ]] || { echo "FAIL: a file was made in /dev"; exit 1; }
echo "ok: the timeline was refused at start-up and the run went on"
