#!/usr/bin/env bash
# Hostile runs of the Fashion-MNIST example that must end cleanly, with the exit status a
# launcher can act on and a message that says what to change:
#
#   hostile_runs.sh <case> <fashion_mnist> <strata-launch> <work folder>
#
#   huge_idx       an IDX header that claims 4 billion images: exit 64, "truncated", no bad_alloc
#   diverged       a learning rate that makes the loss NaN: exit 65 ("training diverged"),
#                  and strata-launch does not restart it
#   bad_strategy   an unknown --strategy under strata-launch: exit 64, one attempt only
#   full_disk      checkpoints onto a 256 KiB tmpfs (a mount namespace of its own): exit 74,
#                  "the disk is full", no temporary files left, one attempt only; skipped
#                  (exit 77) where mount namespaces cannot be made
#   changed_batch  a resume with another --batch than the checkpoints were saved with: exit 64
set -uo pipefail
case=$1 program=$2 launcher=$3 work=$4
data=/usr/share/datasets/fashion-mnist
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1

fail() { echo "FAIL: $*"; exit 1; }
# expect <status> <text> <log>: the run ended with <status>, its log says <text>, and nothing crashed.
expect() {
  [[ $status == "$1" ]] || { cat "$3"; fail "exit status $status, expected $1"; }
  grep -qF -- "$2" "$3" || { cat "$3"; fail "the output does not say \"$2\""; }
  ! grep -qE "core dumped|Segmentation|bad_alloc|terminate called" "$3" || { cat "$3"; fail "the run crashed"; }
  echo "ok: exit status $status, \"$2\""
}
attempts() { grep -c "strata-launch: attempt [0-9]* of" "$1"; }

case $case in
  huge_idx)
    mkdir -p data && cp "$data"/* data/
    # Magic 2051, then 0xFFFFFFFF images of 28x28, then a few pixels.
    printf '\x00\x00\x08\x03\xff\xff\xff\xff\x00\x00\x00\x1c\x00\x00\x00\x1cpixels' | gzip >data/train-images-idx3-ubyte.gz
    "$program" --data data --max-steps 1 >run.log 2>&1; status=$?
    expect 64 "truncated" run.log ;;
  diverged)
    "$launcher" --np 1 --restarts 2 -- "$program" --lr 100 --max-steps 200 >run.log 2>&1; status=$?
    expect 65 "training diverged" run.log
    [[ $(attempts run.log) == 1 ]] || { cat run.log; fail "a diverged run was restarted"; } ;;
  bad_strategy)
    "$launcher" --np 1 --restarts 2 -- "$program" --strategy "AllReduce<Bogus>" >run.log 2>&1; status=$?
    expect 64 "--strategy" run.log
    [[ $(attempts run.log) == 1 ]] || { cat run.log; fail "a bad command line was restarted"; } ;;
  full_disk)
    if ! unshare -m true 2>/dev/null; then echo "SKIP: cannot make a mount namespace here"; exit 77; fi
    mkdir -p checkpoints
    unshare -m bash -c "mount -t tmpfs -o size=256k strata-full-disk checkpoints &&
      '$launcher' --np 1 --restarts 2 -- '$program' --checkpoint-dir checkpoints --checkpoint-every 5 --max-steps 20 \
        >run.log 2>&1; status=\$?; find checkpoints -name '*.tmp*' >leftovers.txt; exit \$status"
    status=$?
    [[ -f run.log ]] || { echo "SKIP: cannot mount a tmpfs here"; exit 77; }
    expect 74 "the disk is full" run.log
    [[ $(attempts run.log) == 1 ]] || { cat run.log; fail "a save onto a full disk was restarted"; }
    [[ ! -s leftovers.txt ]] || { cat leftovers.txt; fail "temporary files were left behind"; } ;;
  changed_batch)
    "$program" --checkpoint-dir checkpoints --checkpoint-every 10 --max-steps 20 --batch 128 >first.log 2>&1 ||
      { cat first.log; fail "the first run failed"; }
    "$program" --checkpoint-dir checkpoints --checkpoint-every 10 --max-steps 40 --batch 64 >run.log 2>&1; status=$?
    expect 64 "--batch: this run has 64, but the checkpoints in checkpoints were saved with 128" run.log ;;
  *) fail "unknown case $case" ;;
esac
