#!/usr/bin/env bash
# The CNN stopped after its first epoch, as if interrupted, and started again: the second run
# resumes from the checkpoint (the executor's state, batch normalization's statistics, the
# shuffling engine), trains epoch 2 only and must reach the two-epoch accuracy bar; a third
# start with other flags must be refused. Exits with the skip code where there is no GPU.
# Arguments: the program, the skip code, the Fashion-MNIST folder, a work folder.
set -euo pipefail
program=$1 skip=$2 data=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
flags=(--epochs 2 --data-dir "$data" --checkpoint-dir "$work/checkpoints")
fail() { echo "FAIL: $*"; exit 1; }

status=0
"$program" "${flags[@]}" --stop-after-epochs 1 >"$work/first.log" 2>&1 || status=$?
cat "$work/first.log"
[ "$status" = "$skip" ] && exit "$skip"
[ "$status" = 0 ] || fail "the first run exited $status"
! grep -q "^epoch 2/2" "$work/first.log" || fail "the first run did not stop after epoch 1"

"$program" "${flags[@]}" --min-accuracy 0.85 | tee "$work/second.log"
grep -q "^resumed from .*: update 468, epoch 1 done" "$work/second.log" || fail "the second run did not resume after epoch 1"
! grep -q "^epoch 1/2" "$work/second.log" || fail "the second run trained epoch 1 again"
grep -q "^epoch 2/2" "$work/second.log" || fail "the second run did not train epoch 2"

status=0
"$program" --epochs 3 --data-dir "$data" --checkpoint-dir "$work/checkpoints" >"$work/third.log" 2>&1 || status=$?
[ "$status" != 0 ] && grep -q "resume with the same flags" "$work/third.log" ||
  { cat "$work/third.log"; fail "a start with other flags was not refused"; }
echo "resumed after epoch 1; other flags refused"
