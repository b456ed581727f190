#!/usr/bin/env bash
# Runs the benchmarks behind the charts in docs/plots/, saves each raw output as
# docs/plots/data/<name>.txt, and draws the charts from them with scripts/plots.py:
#   - allreduce_bw on 2 ranks (and 4 unless NP4=0): bus bandwidth per algorithm and size
#   - compression on 2 ranks: sync time and bytes sent per codec, ResNet-50 and VGG-16
#   - fashion_mnist on 2 ranks under four strategies: test accuracy per epoch
# Needs a build in ./build (bash scripts/build.sh) and Debian's python3-matplotlib.
# Settings: ROUNDS (interleaved benchmark rounds, default 5), EPOCHS (default 10), NP4 (1 or 0).
# About 2 minutes on 2 idle cores with the defaults (numbers taken on a busy machine mean little).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-5}
epochs=${EPOCHS:-10}
np4=${NP4:-1}
data=docs/plots/data
for exe in build/benchmarks/allreduce_bw build/benchmarks/compression build/examples/fashion_mnist; do
  if [ ! -x "$exe" ]; then
    echo "plots.sh: $exe not found: build first (bash scripts/build.sh)" >&2
    exit 1
  fi
done
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  echo "plots.sh: /usr/bin/python3 has no matplotlib: apt-get install python3-matplotlib" >&2
  exit 1
fi
mpi=(mpirun --oversubscribe --bind-to none)
if [ "$(id -u)" = 0 ]; then mpi+=(--allow-run-as-root); fi

# This run's outputs go to a scratch folder and replace the saved ones only once every run
# has succeeded: a failure leaves the saved data (and the charts drawn from it) as they were,
# and an earlier run's files (another strategy list, NP4=1) never mix with this one's.
fresh=$(mktemp -d)
trap 'rm -rf "$fresh"' EXIT

# run NAME RANKS COMMAND...: shows the output and saves it as NAME.txt.
run() {
  local name=$1 ranks=$2
  shift 2
  echo "== $name: ${*}"
  "${mpi[@]}" -np "$ranks" "$@" | tee "$fresh/$name.txt"
}

run allreduce_bw_np2 2 build/benchmarks/allreduce_bw --rounds "$rounds"
if [ "$np4" = 1 ]; then run allreduce_bw_np4 4 build/benchmarks/allreduce_bw --rounds "$rounds"; fi
run compression_np2 2 build/benchmarks/compression --rounds "$rounds"
# The file names order the legend; fashion_mnist accepts only all-reduce strategies.
for entry in "1_ring:AllReduce<Ring>" "2_fp16:AllReduce<Ring>,FP16" \
  "3_topk:AllReduce<Ring>,TopK<0.01>+ErrorFeedback" "4_powersgd:AllReduce<Ring>,PowerSGD<4>+ErrorFeedback"; do
  run "fashion_mnist_${entry%%:*}" 2 build/examples/fashion_mnist --epochs "$epochs" --strategy "${entry#*:}"
done

/usr/bin/python3 scripts/plots.py "$fresh" --out docs/plots
mkdir -p "$data"
rm -f "$data"/*.txt
cp "$fresh"/*.txt "$data"/
