#!/usr/bin/env bash
# Runs strata side by side with the PyTorch DDP peer programs, alternating (A B A B ...),
# and prints medians and ratios as one summary line:
#   - gradient synchronization of ResNet-50: dense_sync vs peers/ddp_sync.py (sync_ms)
#   - Fashion-MNIST training: examples/fashion_mnist vs peers/ddp_fashion_mnist.py; with
#     TRAINER=build/examples/libtorch/libtorch_fashion_mnist the peer's libtorch twin instead
#     (SYNC_ROUNDS=0 leaves out the ResNet-50 part)
# Needs Debian's python3-torch and python3-torchvision (scripts/install_deps.sh --peers), a
# build in ./build, and the peers folder (default ../shared/peers; set PEERS to override).
set -euo pipefail
cd "$(dirname "$0")/.."
peers=${PEERS:-../shared/peers}
sync_rounds=${SYNC_ROUNDS:-5}
train_rounds=${TRAIN_ROUNDS:-2}
epochs=${EPOCHS:-10}
trainer=${TRAINER:-build/examples/fashion_mnist}
# One core per rank on both sides: the peers ask torch for one thread, but PyTorch's matrix
# products run on OpenBLAS, whose threads only its own setting limits (strata's programs set it).
mpi=(mpirun -np 2 --oversubscribe --bind-to none -x OPENBLAS_NUM_THREADS=1)
if [ "$(id -u)" = 0 ]; then mpi+=(--allow-run-as-root); fi
# The same OpenBLAS kernels on both sides: where OpenBLAS does not know the CPU, strata's
# programs name better ones themselves (examples/common/blas.hpp) and the peers get that choice.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  export OPENBLAS_CORETYPE
  OPENBLAS_CORETYPE=$(OPENBLAS_VERBOSE=2 "$trainer" --help 2>&1 | grep -o "Core: [A-Za-z0-9]*" | tail -1 | cut -d' ' -f2)
fi
mpi+=(-x OPENBLAS_CORETYPE)
echo "OpenBLAS kernels on both sides: $OPENBLAS_CORETYPE"

field() { grep -o "$1=[0-9.]*" | tail -1 | cut -d= -f2; }
source benchmarks/stats.sh  # median

strata_sync=() ddp_sync=()
for ((i = 0; i < sync_rounds; ++i)); do
  strata_sync+=("$("${mpi[@]}" build/benchmarks/dense_sync --rounds 9 | field strata_ms)")
  ddp_sync+=("$("${mpi[@]}" /usr/bin/python3 "$peers/ddp_sync.py" --model resnet50 | field sync_ms)")
  echo "round $i: strata_ms=${strata_sync[-1]} ddp_sync_ms=${ddp_sync[-1]}"
done

# Under a constant learning rate the test accuracy moves by about a point from epoch to epoch,
# so beside the last epoch's the mean of the last three is compared.
last3() { tail -3 | awk '{s += $1} END {print s / NR}'; }
strata_epoch=() strata_epoch_sync=() strata_acc=() strata_last3=() ddp_epoch=() ddp_acc=() ddp_last3=()
for ((i = 0; i < train_rounds; ++i)); do
  log=$("${mpi[@]}" "$trainer" --epochs "$epochs")
  out=$(grep summary: <<<"$log")
  strata_epoch+=("$(field seconds_per_epoch <<<"$out")")
  strata_epoch_sync+=("$(awk -v s="$(field sync_seconds <<<"$out")" -v e="$epochs" 'BEGIN {print s / e}')")
  strata_acc+=("$(field test_accuracy <<<"$out")")
  strata_last3+=("$(grep -o "test accuracy [0-9.]*%" <<<"$log" | tr -d % | awk '{print $3 / 100}' | last3)")
  log=$("${mpi[@]}" /usr/bin/python3 "$peers/ddp_fashion_mnist.py" --epochs "$epochs")
  out=$(grep summary <<<"$log")
  ddp_epoch+=("$(awk -v s="$(field train_seconds <<<"$out")" -v e="$epochs" 'BEGIN {print s / e}')")
  ddp_acc+=("$(field test_accuracy <<<"$out")")
  ddp_last3+=("$(grep "^epoch" <<<"$log" | grep -o "test_accuracy=[0-9.]*" | cut -d= -f2 | last3)")
  echo "round $i: strata s/epoch=${strata_epoch[-1]} (sync ${strata_epoch_sync[-1]}) acc=${strata_acc[-1]} last3=${strata_last3[-1]}" \
       " ddp s/epoch=${ddp_epoch[-1]} acc=${ddp_acc[-1]} last3=${ddp_last3[-1]}"
done

s_sync=$(printf '%s\n' "${strata_sync[@]}" | median)
d_sync=$(printf '%s\n' "${ddp_sync[@]}" | median)
if ((sync_rounds == 0)); then s_sync=nan d_sync=nan; fi
s_epoch=$(printf '%s\n' "${strata_epoch[@]}" | median)
s_epoch_sync=$(printf '%s\n' "${strata_epoch_sync[@]}" | median)
d_epoch=$(printf '%s\n' "${ddp_epoch[@]}" | median)
s_acc=$(printf '%s\n' "${strata_acc[@]}" | median)
d_acc=$(printf '%s\n' "${ddp_acc[@]}" | median)
s_last3=$(printf '%s\n' "${strata_last3[@]}" | median)
d_last3=$(printf '%s\n' "${ddp_last3[@]}" | median)
awk -v ss="$s_sync" -v ds="$d_sync" -v se="$s_epoch" -v de="$d_epoch" -v sa="$s_acc" -v da="$d_acc" -v sy="$s_epoch_sync" -v sl="$s_last3" -v dl="$d_last3" 'BEGIN {
  if (ss != "nan") printf "summary: strata_sync_ms=%.2f ddp_sync_ms=%.2f sync_ratio=%.3f ", ss, ds, ss / ds
  else printf "summary: "
  printf "strata_s_per_epoch=%.3f strata_sync_s_per_epoch=%.3f ddp_s_per_epoch=%.3f epoch_ratio=%.3f strata_accuracy=%.4f ddp_accuracy=%.4f accuracy_gap_points=%.2f strata_last3_accuracy=%.4f ddp_last3_accuracy=%.4f last3_gap_points=%.2f\n",
         se, sy, de, se / de, sa, da, 100 * (sa - da), sl, dl, 100 * (sl - dl) }'
