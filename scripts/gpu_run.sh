#!/usr/bin/env bash
# Builds and runs strata's GPU tests and the gpu_kernels benchmark on a machine with a GPU,
# leaving the logs in a folder:
#
#   scripts/gpu_run.sh [LOG_DIR]          LOG_DIR defaults to ./gpu-logs
#
# Needs only CMake >= 3.25, a C++20 host compiler that nvcc accepts, and the CUDA toolkit
# (nvcc, cudart, cuBLAS, CUB). It configures with -DSTRATA_GPU_ONLY=ON: the kernel layer,
# its tests and the benchmark include nothing but the standard library, CUDA and strata's
# own headers, so MPI, Boost, fmt and Catch2 need not be installed, and nothing has to be
# bundled or fetched on a machine without a package registry. Where NCCL is installed
# (nccl.h and libnccl next to the toolkit), the nccl backend's one-rank tests (gpu.nccl,
# gpu.nccl_executor) are built and run with the kernel tests, and the nccl_step benchmark
# after gpu_kernels; none of them needs MPI. Where cuDNN, CLI11 and zlib are found too, the
# CNN example (examples/fashion_mnist_cnn) trains for 15 epochs on one GPU and must reach
# 91.6% test accuracy (Fashion-MNIST's own table for 2 conv + pooling; 93% is the hope),
# once replicated and once with its fully connected layers on the parameter server (--ps).
#
# Environment: STRATA_CUDA_ARCHITECTURES (default 90: H100/H200), BUILD_DIR (default
# build-gpu-run), JOBS (default: all cores).
#
# Where MPI, Boost, fmt, zlib and Catch2 are installed, a second, full build also runs the
# GPU tests that need them: gpu.staged_executor (the host executor over device variables
# through pinned memory) and gpu.nccl_mpi.np2 (two ranks; needs two GPUs, else it checks
# the refusal).
#
# Logs: nvidia-smi.log, configure.log, build.log, ctest.log, configure-full.log,
# build-full.log, ctest-full.log, gpu_kernels.log, nccl_step.log
# (where NCCL was found), fashion_mnist_cnn_{replicated,ps}.log (where the example was built), and
# summary.txt with the benchmarks' and the example's "summary:" lines. Exits non-zero when
# the build or a GPU test fails, when the CNN stays below its target, or when the tests
# were skipped: on this machine a skip means the GPU or its driver was not usable (see
# ctest.log).
set -euo pipefail
cd "$(dirname "$0")/.."
logs="$(realpath -m "${1:-gpu-logs}")"
build="${BUILD_DIR:-build-gpu-run}"
mkdir -p "$logs"

for tool in cmake nvcc; do
  command -v "$tool" >/dev/null || { echo "gpu_run.sh: $tool is not on PATH (CUDA: add /usr/local/cuda/bin)" >&2; exit 1; }
done
nvidia-smi >"$logs/nvidia-smi.log" 2>&1 || echo "gpu_run.sh: nvidia-smi failed; see $logs/nvidia-smi.log" >&2

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
echo "configuring ($build) ..."
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DSTRATA_GPU_ONLY=ON \
  -DSTRATA_CUDA_ARCHITECTURES="${STRATA_CUDA_ARCHITECTURES:-90}" >"$logs/configure.log" 2>&1 ||
  { tail -30 "$logs/configure.log"; exit 1; }
echo "building ..."
cmake --build "$build" -j "${JOBS:-$(nproc)}" >"$logs/build.log" 2>&1 || { tail -30 "$logs/build.log"; exit 1; }

echo "testing ..."
status=0
ctest --test-dir "$build" -L gpu --output-on-failure >"$logs/ctest.log" 2>&1 || status=1
tail -15 "$logs/ctest.log"
if grep -q "Skipped" "$logs/ctest.log"; then
  echo "gpu_run.sh: GPU tests were skipped: no usable GPU or driver here" >&2
  exit 1
fi

# The GPU tests that need the host executor (gpu.staged_executor: MPI's headers, Boost.Hana,
# fmt, zlib, Catch2) or an MPI launcher (gpu.nccl_mpi.np2, where NCCL was found) come from
# the full build, where those are installed; elsewhere they are reported as not run.
full="${build}-full"
echo "configuring the full build ($full) for the staged executor's and MPI's GPU tests ..."
if cmake -S . -B "$full" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DSTRATA_BUILD_EXAMPLES=OFF \
     -DSTRATA_BUILD_BENCHMARKS=OFF -DSTRATA_CUDA_ARCHITECTURES="${STRATA_CUDA_ARCHITECTURES:-90}" \
     >"$logs/configure-full.log" 2>&1; then
  : >"$logs/build-full.log"
  tests=()
  for program in staged_executor nccl_mpi; do
    cmake --build "$full" --target help 2>/dev/null | grep -q "${program}_tests" || continue
    if cmake --build "$full" -j "${JOBS:-$(nproc)}" --target "${program}_tests" >>"$logs/build-full.log" 2>&1; then
      tests+=("$program")
    else
      tail -30 "$logs/build-full.log"
      status=1
    fi
  done
  if ((${#tests[@]} > 0)); then
    pattern="$(IFS='|'; echo "${tests[*]}")"
    ctest --test-dir "$full" -L gpu -R "gpu\.($pattern)" --output-on-failure >"$logs/ctest-full.log" 2>&1 || status=1
    tail -6 "$logs/ctest-full.log"
  fi
else
  echo "gpu_run.sh: no full build here (it needs MPI, Boost, fmt, zlib and Catch2; see configure-full.log):" \
       "gpu.staged_executor and gpu.nccl_mpi.np2 not run" | tee "$logs/ctest-full.log" >&2
fi

echo "benchmarking ..."
: >"$logs/summary.txt"
for benchmark in gpu_kernels nccl_step; do
  [[ -x "$build/benchmarks/$benchmark" ]] || continue
  "$build/benchmarks/$benchmark" 2>&1 | tee "$logs/$benchmark.log" || status=1
  grep "^summary:" "$logs/$benchmark.log" >>"$logs/summary.txt" || status=1
done

cnn="$build/examples/fashion_mnist_cnn/fashion_mnist_cnn"
if [[ -x "$cnn" ]]; then
  for variant in replicated ps; do
    flags=()
    [[ $variant == ps ]] && flags=(--ps)
    echo "training the CNN example ($variant fully connected layers) ..."
    "$cnn" --epochs 15 --min-accuracy 0.916 "${flags[@]}" 2>&1 | tee "$logs/fashion_mnist_cnn_$variant.log" || status=1
    grep "^summary:" "$logs/fashion_mnist_cnn_$variant.log" >>"$logs/summary.txt" || status=1
  done
fi
echo "logs in $logs"
exit "$status"
