#!/usr/bin/env bash
# Kills one rank of a training job with SIGKILL in the middle of the run; strata-launch must
# restart the job from its newest checkpoint, and the final parameters must equal, bit for
# bit, those of the same schedule run without a fault: <ranks> ranks up to that checkpoint,
# <restart ranks> from there. (Against a run on <restart ranks> throughout, a restart on fewer
# ranks sums in another order: 2.8e-4 apart in 240 updates on an Intel Xeon.)
#
#   kill_and_resume.sh <strata-launch> <fashion_mnist> <compare_params> <work folder>
#                      <ranks> <restart ranks> [mpirun flags...]
set -euo pipefail
launcher=$1 program=$2 compare=$3 work=$4 ranks=$5 restart_ranks=$6
shift 6
mpirun_flags=("$@")
training=(--epochs 1 --max-steps 240 --seed 7)
source "$(dirname "$0")/same_schedule.sh"

rm -rf "$work" && mkdir -p "$work"
cd "$work"

echo "== $ranks ranks under strata-launch; rank 1 is killed once a checkpoint exists"
launch_flags=()
for flag in "${mpirun_flags[@]}"; do launch_flags+=(--mpirun-arg "$flag"); done
"$launcher" --np "$ranks" --restart-np "$restart_ranks" --restarts 2 "${launch_flags[@]}" -- \
  "$program" "${training[@]}" --checkpoint-dir checkpoints --checkpoint-every 40 --slow-down-ms 15 \
  --save-params resumed.bin >launch.log 2>&1 &
launched=$!

# Rank 1 of the first attempt: the process whose environment says so.
rank_one() {
  for pid in $(pgrep -x "$(basename "$program" | cut -c1-15)"); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 &&
       tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx STRATA_LAUNCH_ATTEMPT=1; then
      echo "$pid"
    fi
  done
}
for ((i = 0; i < 1200; ++i)); do  # up to 120 s
  [[ -e checkpoints/step-000000000080/commit.ckpt ]] && break
  kill -0 "$launched" 2>/dev/null || { cat launch.log; echo "FAIL: the job ended before a checkpoint was committed"; exit 1; }
  sleep 0.1
done
victim=$(rank_one)
[[ -n $victim ]] || { cat launch.log; echo "FAIL: rank 1 of the first attempt was not found"; exit 1; }
kill -9 "$victim"
echo "killed rank 1 (pid $victim) with SIGKILL"

status=0
wait "$launched" || status=$?
cat launch.log
((status == 0)) || { echo "FAIL: strata-launch exited with $status"; exit 1; }
grep -q "attempt 1 failed" launch.log || { echo "FAIL: the first attempt did not fail"; exit 1; }
resumed=$(grep -Eo "resumed from checkpoints/step-[0-9]+ at update [0-9]+" launch.log | tail -1 | awk '{print $NF}')
[[ -n $resumed ]] || { echo "FAIL: the restart did not resume from a checkpoint"; exit 1; }

same_schedule_without_fault "$ranks" "$restart_ranks" "$resumed" "${STRATA_MPIRUN:-mpirun}" "${mpirun_flags[@]}" -- \
  "$program" "${training[@]}" --checkpoint-every 40
"$compare" --tolerance 0 reference.bin resumed.bin
