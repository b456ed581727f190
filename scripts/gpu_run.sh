#!/usr/bin/env bash
# Builds and runs strata's GPU work on a machine with a GPU, one phase per call, so that each
# fits a command of at most 10 minutes; every phase writes its log into LOG_DIR:
#
#   scripts/gpu_run.sh PHASE [LOG_DIR]          LOG_DIR defaults to ./gpu-logs
#
#   build      configure (-DSTRATA_GPU_ONLY=ON -DSTRATA_REQUIRE_GPU_PARTS=ON) and build: the
#              kernel layer, the GPU tests, gpu_kernels, nccl_step and the CNN example
#   test       ctest -L gpu: every GPU test; a skip fails (here it means the GPU or its driver
#              is not usable)
#   kernels    the gpu_kernels benchmark
#   nccl_step  the nccl_step benchmark
#   cnn        the CNN example for 15 epochs (target 91.6% test accuracy), replicated
#   cnn_ps     the same with its fully connected layers on the parameter server
#   staged     the staged executor's GPU test (gpu.staged_executor), built on a host machine
#              and carried in .deps/staged/ (scripts/gpu_deps.sh): it needs no MPI at run time
#   full       where MPI, Boost, fmt and Catch2 are installed: a second build for the GPU tests
#              that need them (gpu.staged_executor, gpu.nccl_mpi.np2; the latter needs two GPUs)
#
# The build needs CMake >= 3.25, nvcc (CUDA 13) and a C++20 host compiler, nothing else
# installed: NCCL and cuDNN are found in Python's site-packages (the nvidia-nccl-cu13 and
# nvidia-cudnn-cu13 wheels) or under NCCL_ROOT / CUDNN_ROOT; CLI11's and zlib's headers and
# the Fashion-MNIST files come from .deps/ (scripts/gpu_deps.sh makes it; it travels with the
# working tree). A part that should build and does not is a failure, not a skip.
# docs/gpu.md has the commands for the GPU machine.
#
# Environment: STRATA_CUDA_ARCHITECTURES (default 90: H100/H200), BUILD_DIR (default
# build-gpu-run), JOBS (default: all cores), STRATA_CMAKE_ARGS (more configure arguments).
set -euo pipefail
cd "$(dirname "$0")/.."
phase=${1:?"usage: scripts/gpu_run.sh build|test|kernels|nccl_step|cnn|cnn_ps|staged|full [LOG_DIR]"}
logs="$(realpath -m "${2:-gpu-logs}")"
build="${BUILD_DIR:-build-gpu-run}"
deps="$PWD/.deps"
mkdir -p "$logs"
touch "$logs/summary.txt"

fail() { echo "gpu_run.sh ($phase): $*" >&2; exit 1; }
# run_logged <log> <command...>: runs it, its output in the log; on failure, the log's tail.
run_logged() {
  local log=$1
  shift
  "$@" >"$log" 2>&1 || { tail -40 "$log"; fail "failed; see $log"; }
}
# summary <log>: the log's summary: line into summary.txt (replacing this phase's earlier one).
summary() {
  local line
  line=$(grep "^summary:" "$1" | tail -1) || fail "no summary: line in $1"
  grep -v "^$phase: " "$logs/summary.txt" >"$logs/summary.txt.new" || true
  echo "$phase: $line" >>"$logs/summary.txt.new"
  mv "$logs/summary.txt.new" "$logs/summary.txt"
  echo "$line"
}
built() { [[ -f "$build/CMakeCache.txt" ]] || fail "run the build phase first"; }

case $phase in
  build)
    for tool in cmake nvcc; do
      command -v "$tool" >/dev/null || fail "$tool is not on PATH (CUDA: add /usr/local/cuda/bin)"
    done
    nvidia-smi >"$logs/nvidia-smi.log" 2>&1 || echo "gpu_run.sh: nvidia-smi failed; see $logs/nvidia-smi.log" >&2
    generator=()
    command -v ninja >/dev/null && generator=(-G Ninja)
    echo "configuring ($build) ..."
    run_logged "$logs/configure.log" cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DSTRATA_GPU_ONLY=ON -DSTRATA_REQUIRE_GPU_PARTS=ON -DSTRATA_DEPS_DIR="$deps" \
      -DSTRATA_CUDA_ARCHITECTURES="${STRATA_CUDA_ARCHITECTURES:-90}" ${STRATA_CMAKE_ARGS:-}
    grep "strata:" "$logs/configure.log" || true
    echo "building ..."
    run_logged "$logs/build.log" cmake --build "$build" -j "${JOBS:-$(nproc)}"
    echo "built" ;;
  test)
    built
    status=0
    ctest --test-dir "$build" -L gpu --output-on-failure --timeout 300 >"$logs/ctest.log" 2>&1 || status=1
    tail -15 "$logs/ctest.log"
    ! grep -q "Skipped" "$logs/ctest.log" || fail "GPU tests were skipped: no usable GPU or driver here (ctest.log)"
    exit "$status" ;;
  kernels | nccl_step)
    built
    program="$build/benchmarks/${phase/kernels/gpu_kernels}"
    [[ -x $program ]] || fail "$program was not built"
    "$program" 2>&1 | tee "$logs/$phase.log"
    summary "$logs/$phase.log" ;;
  cnn | cnn_ps)
    built
    cnn="$build/examples/fashion_mnist_cnn/fashion_mnist_cnn"
    [[ -x $cnn ]] || fail "$cnn was not built"
    flags=(--epochs 15 --min-accuracy 0.916)
    [[ -d $deps/fashion-mnist ]] && flags+=(--data-dir "$deps/fashion-mnist")
    [[ $phase == cnn_ps ]] && flags+=(--ps)
    status=0
    "$cnn" "${flags[@]}" 2>&1 | tee "$logs/$phase.log" || status=1
    summary "$logs/$phase.log"
    exit "$status" ;;
  staged)
    program="$deps/staged/staged_executor_tests"
    [[ -x $program ]] || fail "$program is missing: run scripts/gpu_deps.sh after building staged_executor_tests"
    cuda_lib="$(dirname "$(dirname "$(command -v nvcc)")")/lib64"
    status=0
    LD_LIBRARY_PATH="$deps/staged:$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$program" 2>&1 | tee "$logs/staged.log" ||
      status=1
    exit "$status" ;;
  full)
    # The GPU tests that need the host executor (MPI's headers, Boost.Hana, fmt, zlib, Catch2)
    # or an MPI launcher come from a second build, where those are installed.
    full="${build}-full"
    generator=()
    command -v ninja >/dev/null && generator=(-G Ninja)
    run_logged "$logs/configure-full.log" cmake -S . -B "$full" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DSTRATA_BUILD_EXAMPLES=OFF -DSTRATA_BUILD_BENCHMARKS=OFF -DSTRATA_CUDA_ARCHITECTURES="${STRATA_CUDA_ARCHITECTURES:-90}"
    run_logged "$logs/build-full.log" cmake --build "$full" -j "${JOBS:-$(nproc)}" --target staged_executor_tests nccl_mpi_tests
    status=0
    ctest --test-dir "$full" -L gpu -R "gpu\.(staged_executor|nccl_mpi)" --output-on-failure >"$logs/ctest-full.log" 2>&1 ||
      status=1
    tail -8 "$logs/ctest-full.log"
    exit "$status" ;;
  *) fail "unknown phase; phases: build test kernels nccl_step cnn cnn_ps staged full" ;;
esac
