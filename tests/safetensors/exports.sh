#!/usr/bin/env bash
# strata-ckpt against the real safetensors package (Python), one case per mode:
#
#   exports.sh vit <strata-ckpt> <vit> <work> [mpirun flags...]
#     a ViT on a tp=2 mesh (2 ranks), then on pp=2, trains and checkpoints; each export, read
#     by Python, equals the parameters the two ranks held, bit for bit (each rank's tensor-
#     parallel parts, or its pipeline stage's tensors).
#   exports.sh ps <strata-ckpt> <ps_state> <work> [mpirun flags...]
#     the same for parameter-server shards (uneven, dense and sparse) on 2 ranks.
#   exports.sh import_resume <strata-ckpt> <fashion_mnist> <work> [mpirun flags...]
#     Python writes weights (safetensors.numpy.save_file, biases in float16); imported
#     (strata-ckpt import, then a resume) and loaded (executor::load_weights, --init-weights),
#     they give one first-step loss on 1, 2 and 4 ranks, unlike a fresh start.
#   exports.sh libtorch <strata-ckpt> <libtorch_fashion_mnist> <python_twin.py> <work> [mpirun flags...]
#     the libtorch example's export loads into its PyTorch twin with load_state_dict and
#     evaluates to the accuracy the C++ program reported; its checkpoint resumes bitwise.
#   exports.sh memory <strata-ckpt> <big_checkpoint> <work>
#     exporting a checkpoint of 1 GiB keeps the peak RSS under 1.2x its largest tensor + 64 MiB.
#
# Exit 77 (skipped) where Python's numpy or safetensors is missing (scripts/install_deps.sh
# installs safetensors from PyPI).
set -euo pipefail
mode=$1 ckpt=$2
mpirun=${STRATA_MPIRUN:-mpirun}
python=${STRATA_PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
"$python" -c "import numpy, safetensors" 2>/dev/null ||
  { echo "exports.sh: skipped: $python has no numpy or safetensors (pip install safetensors)"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

case $mode in
vit)
  program=$3 work=$4; shift 4
  rm -rf "$work" && mkdir -p "$work"
  for mesh in tp=2 pp=2; do
    "$mpirun" -n 2 "$@" "$program" --mesh $mesh --epochs 1 --max-steps 3 --global-batch 16 \
      --checkpoints "$work/$mesh" --save-state "$work/$mesh/state"
    "$ckpt" info "$work/$mesh" | tee "$work/$mesh/info.txt"
    grep -q "saved by 2 ranks on mesh .*$mesh" "$work/$mesh/info.txt" || fail "info does not show the mesh"
    grep -q "Replicate,.*AllReduce<Ring>" "$work/$mesh/info.txt" || fail "info does not show the strategies"
    "$ckpt" export "$work/$mesh" --to "$work/$mesh.safetensors"
    "$python" "$here/compare_export.py" "$work/$mesh.safetensors" "$work/$mesh"/state.rank-*.safetensors
  done
  grep -q "TensorParallel<0>" "$work/tp=2/info.txt" || fail "info does not show the tensor-parallel strategies"
  ;;
ps)
  program=$3 work=$4; shift 4
  rm -rf "$work" && mkdir -p "$work"
  "$mpirun" -n 2 "$@" "$program" "$work/checkpoints" "$work/state"
  "$ckpt" info "$work/checkpoints" | tee "$work/info.txt"
  grep -q "PS<3>,Partition<0>" "$work/info.txt" || fail "info does not show the strategies"
  "$ckpt" export "$work/checkpoints" --to "$work/ps.safetensors"
  "$python" "$here/compare_export.py" "$work/ps.safetensors" "$work"/state.rank-*.safetensors
  # The optimizer state comes along when asked, and only then.
  "$ckpt" export "$work/checkpoints" --to "$work/ps_state.safetensors" --optimizer-state
  "$python" - "$work/ps.safetensors" "$work/ps_state.safetensors" <<'PY'
import sys
from safetensors.numpy import load_file
plain, full = load_file(sys.argv[1]), load_file(sys.argv[2])
extra = sorted(set(full) - set(plain))
assert not any("/" in n for n in plain), sorted(plain)
assert "w/momentum_buffer" in extra and "b/momentum_buffer" in extra, extra
print("optimizer state exported on request:", extra)
PY
  ;;
import_resume)
  program=$3 work=$4; shift 4
  rm -rf "$work" && mkdir -p "$work"
  "$mpirun" -n 1 "$@" "$program" --epochs 1 --max-steps 20 --checkpoint-dir "$work/trained" >/dev/null
  "$ckpt" export "$work/trained" --to "$work/trained.safetensors"
  # Python writes the weights of another model of the same architecture.
  "$python" - "$work/trained.safetensors" "$work/python.safetensors" <<'PY'
import sys
import numpy as np
from safetensors.numpy import load_file, save_file
trained = load_file(sys.argv[1])
rng = np.random.default_rng(7)
written = {name: (0.8 * w + 0.01 * rng.standard_normal(w.shape)).astype(np.float16 if w.ndim == 1 else np.float32)
           for name, w in trained.items()}
save_file(written, sys.argv[2], metadata={"written_by": "safetensors.numpy"})
print("python wrote", {n: (str(w.dtype), w.shape) for n, w in written.items()})
PY
  # Each rank count twice: resumed from the import, and loaded by the executor (--init-weights).
  losses=()
  first_loss() { sed -n 's/^epoch  1  loss \([0-9.]*\) .*/\1/p' "$1"; }
  for ranks in 1 2 4; do
    "$ckpt" import "$work/python.safetensors" --into "$work/imported.np$ranks"
    "$mpirun" -n "$ranks" "$@" "$program" --epochs 1 --max-steps 1 --checkpoint-dir "$work/imported.np$ranks" |
      tee "$work/np$ranks.log"
    grep -q "resumed from .* at update 0" "$work/np$ranks.log" || fail "np$ranks did not resume from the import"
    "$mpirun" -n "$ranks" "$@" "$program" --epochs 1 --max-steps 1 --init-weights "$work/python.safetensors" |
      tee "$work/loaded.np$ranks.log"
    grep -q "weights loaded from" "$work/loaded.np$ranks.log" || fail "np$ranks did not load the weights"
    losses+=("$(first_loss "$work/np$ranks.log")" "$(first_loss "$work/loaded.np$ranks.log")")
  done
  "$mpirun" -n 1 "$@" "$program" --epochs 1 --max-steps 1 | tee "$work/fresh.log"
  fresh=$(first_loss "$work/fresh.log")
  "$python" - "$fresh" "${losses[@]}" <<'PY'
import sys
fresh, losses = float(sys.argv[1]), [float(x) for x in sys.argv[2:]]
print(f"first-step loss from the Python weights on 1, 2, 4 ranks (imported, loaded): {losses}; from a fresh start: {fresh}")
assert len(losses) == 6, losses
assert max(losses) - min(losses) <= 1e-5 * max(losses), "the ranks' runs disagree"
assert abs(losses[0] - fresh) > 1e-3, "the imported weights changed nothing"
PY
  ;;
libtorch)
  program=$3 twin=$4 work=$5; shift 5
  rm -rf "$work" && mkdir -p "$work"
  "$mpirun" -n 2 "$@" "$program" --epochs 1 --max-steps 50 --checkpoint-dir "$work/checkpoints" | tee "$work/train.log"
  accuracy=$(sed -n 's/^summary: .*test_accuracy=\([0-9.]*\) .*/\1/p' "$work/train.log")
  [[ -n $accuracy ]] || fail "no summary line"
  "$ckpt" export "$work/checkpoints" --to "$work/model.safetensors"
  "$python" "$twin" --evaluate "$work/model.safetensors" --expect-accuracy "$accuracy"
  # The example's checkpoints resume: 50 updates, then 50 more, end bitwise where 100 do.
  "$mpirun" -n 2 "$@" "$program" --epochs 1 --max-steps 100 --checkpoint-dir "$work/checkpoints" \
    --save-params "$work/resumed.bin" | tee "$work/resumed.log"
  grep -q "resumed from .* at update 50" "$work/resumed.log" || fail "the example did not resume"
  "$mpirun" -n 2 "$@" "$program" --epochs 1 --max-steps 100 --save-params "$work/straight.bin" >/dev/null
  cmp "$work/resumed.bin" "$work/straight.bin" || fail "the resumed run ends elsewhere than the uninterrupted one"
  ;;
memory)
  program=$3 work=$4
  rm -rf "$work" && mkdir -p "$work"
  "$program" "$work/checkpoints"
  "$python" - "$ckpt" "$work" <<'PY'
import os, resource, subprocess, sys
ckpt, work = sys.argv[1], sys.argv[2]
subprocess.run([ckpt, "export", f"{work}/checkpoints", "--to", f"{work}/big.safetensors"], check=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # the export's, the only child
size = os.path.getsize(f"{work}/big.safetensors")
largest = 256 << 20
bound = 1.2 * largest + (64 << 20)
print(f"export of {size / 2**30:.2f} GiB: peak RSS {peak / 2**20:.1f} MiB, bound {bound / 2**20:.1f} MiB "
      f"(1.2 x the largest tensor of {largest >> 20} MiB + 64 MiB)")
assert size > (1 << 30) - (64 << 20), size
assert peak < bound
PY
  rm -rf "$work"
  ;;
*) fail "unknown mode $mode" ;;
esac
