#!/usr/bin/env bash
# A host's link taken down in the middle of a 2 hosts x 2 ranks training job under
# strata-launch: the job must end within the deadline plus a few seconds with a message that
# names what was lost, and strata-launch must restart it on the host that is left (2 ranks),
# from the newest checkpoint, to the parameters of an uninterrupted 2-rank run within rounding.
# Exit 77 (skipped) where network namespaces cannot be made.
# Arguments: cluster.sh, strata-launch, the fashion_mnist program, compare_params, a work folder.
set -euo pipefail
cluster=$1 launcher=$2 program=$3 compare=$4 work=$5
deadline=5
training=(--epochs 1 --max-steps 240 --seed 7)
rm -rf "$work" && mkdir -p "$work"
cd "$work"
trap 'bash "$cluster" down >/dev/null 2>&1 || true' EXIT
status=0
bash "$cluster" up --hosts 2 --slots 2 --rate 10gbit || status=$?
if [ "$status" != 0 ]; then exit "$status"; fi
cluster_mpirun=/run/strata-cluster/mpirun

echo "== uninterrupted reference on 2 ranks of host 0"
bash "$cluster" link 1 down
"$cluster_mpirun" -n 2 "$program" "${training[@]}" --save-params reference.bin | tail -1
bash "$cluster" link 1 up

echo "== 2 hosts x 2 ranks under strata-launch; host 1's link goes down once a checkpoint exists"
STRATA_TIMEOUT_SECONDS=$deadline "$launcher" --mpirun "$cluster_mpirun" --mpirun-arg -x --mpirun-arg STRATA_TIMEOUT_SECONDS \
  --np 4 --restart-np 2 --restarts 1 -- \
  "$program" "${training[@]}" --checkpoint-dir checkpoints --checkpoint-every 40 --slow-down-ms 15 \
  --save-params resumed.bin >launch.log 2>&1 &
launched=$!
for ((i = 0; i < 1200; ++i)); do  # up to 120 s
  [[ -e checkpoints/step-000000000080/commit.ckpt ]] && break
  kill -0 "$launched" 2>/dev/null || { cat launch.log; echo "FAIL: the job ended before a checkpoint was committed"; exit 1; }
  sleep 0.1
done
bash "$cluster" link 1 down
cut=$(date +%s.%N)
echo "host 1's link is down"

# The first attempt must end within the deadline plus a few seconds: strata-launch says so
# when it starts the next one.
for ((i = 0; i < 600; ++i)); do
  grep -q "attempt 2 of" launch.log && break
  kill -0 "$launched" 2>/dev/null || break
  sleep 0.1
done
ended=$(date +%s.%N)
status=0
wait "$launched" || status=$?
cat launch.log
seconds=$(awk -v a="$cut" -v b="$ended" 'BEGIN {printf "%.1f", b - a}')
echo "the first attempt ended ${seconds} s after the link went down (deadline ${deadline} s)"
awk -v s="$seconds" -v d="$deadline" 'BEGIN {exit !(s <= d + 10)}' || { echo "FAIL: it took longer than the deadline + 10 s"; exit 1; }
grep -Eq "ranks 2, 3 did not reach|198\.18\.0\.2|strata-h1" launch.log || { echo "FAIL: neither the ranks of host 1 (2, 3) nor its address are named"; exit 1; }
[ "$status" = 0 ] || { echo "FAIL: strata-launch exited $status"; exit 1; }
grep -q "resumed from" launch.log || { echo "FAIL: the restart did not resume from a checkpoint"; exit 1; }
"$compare" --tolerance 1e-4 reference.bin resumed.bin
