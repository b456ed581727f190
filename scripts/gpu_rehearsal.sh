#!/usr/bin/env bash
# Rehearses, on a machine without a GPU, what scripts/gpu_run.sh's build phase does on the
# bare GPU machine: NCCL and cuDNN only from PyPI's wheels (nvidia-nccl-cu13,
# nvidia-cudnn-cu13, installed into a scratch folder, not the toolkit's copies), CLI11's and
# zlib's headers and the dataset only from .deps/. It must configure with every GPU part
# required, build, link the wheels' libraries (not the toolkit's), and list every GPU test;
# the tests themselves skip here (no GPU) and are not run, but the CPU checks of the GPU
# build are.
#
#   scripts/gpu_rehearsal.sh [SCRATCH]        SCRATCH defaults to /tmp/strata-gpu-rehearsal
#
# Downloads about 820 MB of wheels the first time (kept in SCRATCH/wheels).
set -euo pipefail
cd "$(dirname "$0")/.."
scratch="${1:-/tmp/strata-gpu-rehearsal}"
python=/usr/bin/python3
mkdir -p "$scratch/wheels"
fail() { echo "gpu_rehearsal.sh: FAIL: $*" >&2; exit 1; }

echo "== wheels"
for wheel in nvidia-nccl-cu13 nvidia-cudnn-cu13; do
  ls "$scratch/wheels/${wheel//-/_}"-*.whl >/dev/null 2>&1 ||
    "$python" -m pip download --quiet --no-deps -d "$scratch/wheels" "$wheel"
done
if [[ ! -d "$scratch/site/nvidia/nccl" || ! -d "$scratch/site/nvidia/cudnn" ]]; then
  "$python" -m pip install --quiet --no-deps --target "$scratch/site" "$scratch"/wheels/*.whl
fi
ls "$scratch/site/nvidia/nccl/lib" "$scratch/site/nvidia/cudnn/lib" | head -20

echo "== .deps"
bash scripts/gpu_deps.sh

echo "== build (GPU only, every part required), as gpu_run.sh's build phase"
export NCCL_ROOT="$scratch/site/nvidia/nccl" CUDNN_ROOT="$scratch/site/nvidia/cudnn"
# This machine's own CLI11 and zlib packages are hidden: .deps/ must serve, as there.
export STRATA_CMAKE_ARGS="-DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON -DCMAKE_DISABLE_FIND_PACKAGE_ZLIB=ON"
BUILD_DIR="$scratch/build" JOBS="${JOBS:-$(nproc)}" bash scripts/gpu_run.sh build "$scratch/logs"

echo "== checks"
cache="$scratch/build/CMakeCache.txt"
for entry in STRATA_NCCL_INCLUDE_DIR STRATA_NCCL_LIBRARY STRATA_CUDNN_INCLUDE_DIR STRATA_CUDNN_LIBRARY; do
  value=$(grep "^$entry:" "$cache" | cut -d= -f2-)
  [[ $value == "$scratch/site/"* ]] || fail "$entry is $value, not the wheel's"
  echo "$entry = $value"
done
for program in tests/gpu/nccl_tests tests/gpu/nccl_executor_tests examples/fashion_mnist_cnn/fashion_mnist_cnn; do
  [[ -x "$scratch/build/$program" ]] || fail "$program was not built"
done
ldd "$scratch/build/tests/gpu/nccl_tests" | grep -q "$scratch/site/nvidia/nccl/lib/libnccl.so.2" ||
  fail "nccl_tests does not load the wheel's libnccl.so.2: $(ldd "$scratch/build/tests/gpu/nccl_tests" | grep nccl)"
ldd "$scratch/build/examples/fashion_mnist_cnn/fashion_mnist_cnn" | grep -q "$scratch/site/nvidia/cudnn/lib/libcudnn.so.9" ||
  fail "fashion_mnist_cnn does not load the wheel's libcudnn.so.9"
gpu_tests=$(ctest --test-dir "$scratch/build" -N -L gpu)
for test in gpu.cast gpu.optimizer gpu.pack gpu.sparse_rows gpu.top_k gpu.low_rank gpu.nccl gpu.nccl_executor gpu.nccl_checkpoint \
            benchmark.gpu_kernels.smoke benchmark.nccl_step.smoke gpu.example.fashion_mnist_cnn \
            gpu.example.fashion_mnist_cnn_ps; do
  grep -q ": $test\$" <<<"$gpu_tests" || fail "$test is not among the GPU tests"
done
echo "$(grep -c "Test *#" <<<"$gpu_tests") GPU tests listed"
ctest --test-dir "$scratch/build" -L cuda --output-on-failure | tail -3
echo "gpu_rehearsal.sh: the GPU build works from the wheels and .deps/ alone"
