#!/usr/bin/env bash
# Checkpoints of a mesh run restore into another mesh, and a stage that stops costs nothing:
#
#   mesh_checkpoints.sh reshape <mesh_training> <work folder> [mpirun flags...]
#     tp=2,pp=2 on 4 ranks trains 25 updates and saves; dp=4 on 4 ranks, tp=4 (GPipe) on 4
#     ranks and one rank each resume from that checkpoint to update 50, and each must end
#     where an uninterrupted one-rank run ends (mesh_training compares).
#   mesh_checkpoints.sh stopped_stage <mesh_training> <strata-launch> <work folder> [mpirun flags...]
#     dp=2,pp=2 on 4 ranks under strata-launch, saving every 10 updates; rank 3 (stage 1)
#     stops before update 33. Its neighbour's deadline must name it by stage and mesh
#     coordinates, the job must end, and strata-launch must restart it on 2 ranks (dp=1,pp=2)
#     from the checkpoint of update 30, to the uninterrupted result.
set -euo pipefail
mode=$1
mpirun=${STRATA_MPIRUN:-mpirun}
if [[ $mode == reshape ]]; then
  program=$2 work=$3
  shift 3
  rm -rf "$work" && mkdir -p "$work"
  "$mpirun" -n 4 "$@" "$program" --mesh tp=2,pp=2 --checkpoints "$work" --save-at 25 --stop-after 25
  "$mpirun" -n 4 "$@" "$program" --mesh dp=4 --checkpoints "$work" | tee "$work/dp4.log"
  "$mpirun" -n 4 "$@" "$program" --mesh tp=4 --schedule gpipe --checkpoints "$work" | tee "$work/tp4.log"
  "$mpirun" -n 1 "$@" "$program" --checkpoints "$work" | tee "$work/one.log"
  for log in dp4 tp4 one; do
    grep -q "resumed from the checkpoint of update 25" "$work/$log.log" || { echo "FAIL: $log did not resume"; exit 1; }
  done
elif [[ $mode == stopped_stage ]]; then
  program=$2 launcher=$3 work=$4
  shift 4
  launch_flags=()
  for flag in "$@"; do launch_flags+=(--mpirun-arg "$flag"); done
  rm -rf "$work" && mkdir -p "$work"
  status=0
  "$launcher" --np 4 --restart-np 2 --restarts 1 "${launch_flags[@]}" -- "$program" --mesh pp=2 --timeout 3 \
    --stall 3 33 --save-every 10 --checkpoints "$work/checkpoints" >"$work/launch.log" 2>&1 || status=$?
  cat "$work/launch.log"
  ((status == 0)) || { echo "FAIL: strata-launch exited with $status"; exit 1; }
  grep -q "waited for the gradient from stage 1, rank 3 (dp=1,tp=0,pp=1), which did not send it" "$work/launch.log" ||
    { echo "FAIL: the deadline did not name the stopped stage"; exit 1; }
  grep -q "attempt 1 failed" "$work/launch.log" || { echo "FAIL: the first attempt did not fail"; exit 1; }
  grep -q "resumed from the checkpoint of update 30" "$work/launch.log" || { echo "FAIL: no resume from update 30"; exit 1; }
else
  echo "usage: mesh_checkpoints.sh reshape|stopped_stage ..." >&2
  exit 2
fi
