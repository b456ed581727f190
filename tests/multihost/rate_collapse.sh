#!/usr/bin/env bash
# Host 1's link collapses from 10 Gbit/s to 100 Mbit/s (1% of its rate) in the middle of a
# 2 hosts x 2 ranks training job: the job slows down but loses nothing, and ends on exactly
# the parameters of the same run on 4 ranks of one host.
# Exit 77 (skipped) where network namespaces cannot be made.
# Arguments: cluster.sh, the fashion_mnist program, compare_params, the one-host parameters, a work folder.
set -euo pipefail
cluster=$1 program=$2 compare=$3 reference=$4 work=$5
source "$(dirname "$0")/common.sh"
rm -rf "$work" && mkdir -p "$work"
cd "$work"
cluster_up

start=$(date +%s.%N)
bash "$cluster" run -np 4 "$program" --epochs 1 --max-steps 60 --strategy "AllReduce<Ring>" \
  --checkpoint-dir checkpoints --checkpoint-every 20 --save-params params.2x2.bin >run.log 2>&1 &
launched=$!
wait_for_commit 20 run.log  # a third of the way in
collapsed=$(date +%s.%N)
bash "$cluster" shape 1 100mbit
kill -0 "$launched" 2>/dev/null ||
  { cat run.log; echo "FAIL: the job had ended before the link collapsed, so nothing was tested"; exit 1; }
echo "host 1's link collapsed to 100mbit after update 20"
status=0
wait "$launched" || status=$?
launched=0
ended=$(date +%s.%N)
tail -2 run.log
[ "$status" = 0 ] || { cat run.log; echo "FAIL: the job exited $status after the link collapsed"; exit 1; }
awk -v a="$start" -v b="$collapsed" -v c="$ended" \
  'BEGIN {printf "updates 1-20 at 10gbit: %.1f s (with start-up); updates 21-60 at 100mbit: %.1f s\n", b - a, c - b}'
"$compare" --tolerance 0 "$reference" params.2x2.bin
