#!/usr/bin/env bash
# A rank stopped (SIGSTOP) anywhere in a mesh ends the job within the deadline + 2 s, and
# every deadline message names it:
#
#   stopped_in_mesh.sh <mesh_training> <ranks> <mesh> <rank> <update> <where> <work folder> [mpirun flags...]
#
# <where>: update, forward, backward or evaluation (mesh_training's --sigstop). The deadline
# is 3 s; the time is counted from the moment the rank stopped itself (it prints it).
set -euo pipefail
program=$1 ranks=$2 mesh=$3 rank=$4 update=$5 where=$6 work=$7
shift 7
mpirun=${STRATA_MPIRUN:-mpirun}
deadline=3
mkdir -p "$work"
log="$work/$(echo "$mesh.$rank.$where" | tr ',=' '_-').log"
status=0
timeout 60 "$mpirun" -n "$ranks" "$@" "$program" --mesh "$mesh" --updates 8 --evaluate-every 1 --timeout $deadline \
  --sigstop "$rank" "$update" "$where" >"$log" 2>&1 || status=$?
ended=$(date +%s.%N)
cat "$log"
fail() { echo "FAIL ($mesh, rank $rank stopped in the $where of update $update): $*"; exit 1; }
((status != 0)) || fail "the job succeeded"
((status != 124)) || fail "the job hung for 60 s"
stopped=$(sed -n "s/^mesh_training: rank $rank stops (SIGSTOP) .* at \([0-9.]*\)$/\1/p" "$log" | head -1)
[[ -n $stopped ]] || fail "rank $rank never stopped"
took=$(awk -v a="$ended" -v b="$stopped" 'BEGIN { printf "%.3f", a - b }')
echo "the job ended $took s after rank $rank stopped (deadline $deadline s)"
awk -v t="$took" -v d=$deadline 'BEGIN { exit !(t <= d + 2) }' || fail "the job took $took s to end, more than the deadline + 2 s"
name=$(printf 'rank %d (' "$rank")
messages=$(grep "no progress for" "$log" || true)
[[ -n $messages ]] || fail "no rank reported the stall"
while IFS= read -r line; do
  body=${line#*: no progress}  # without the reporting rank's name
  [[ $body == *"$name"*"did not"* || $body == *"for $name"* ]] ||
    fail "a message does not name the stopped rank $rank: $line"
done <<<"$messages"
! grep -Eq "Segmentation|core dumped|double free|corrupted" "$log" || fail "a rank crashed"
echo "every one of $(wc -l <<<"$messages") deadline messages names rank $rank"
