#!/usr/bin/env bash
# The unit tests (loopback ranks as threads) and the simulated device's (simdev) under
# AddressSanitizer + UndefinedBehaviorSanitizer and under ThreadSanitizer, then the libFuzzer
# targets (the strategy-string parser, the checkpoint reader, the safetensors reader) side by
# side for FUZZ_SECONDS (default 15). A crash fails the script once all have ended; its
# input, saved by libFuzzer, belongs in tests/fuzz/corpus/<target>/ as a regression test.
# Each runs in its own build folder; examples and benchmarks are not built here.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzz_seconds=${FUZZ_SECONDS:-15}
# -g1: line tables for the reports, much faster to compile than -g. ASan+UBSan at -O0: it
# compiles in 0.6x the time of -O1 (UBSan's checks double -O1's optimizer work) and finds the
# same errors; the tests then take 57 s instead of 20. TSan at -O1, which it needs to run fast.
# No CUDA: these builds compile host code only, and looking for nvcc costs 9 s per configure.
common=(-G Ninja -DCMAKE_BUILD_TYPE=Sanitize -DSTRATA_BUILD_EXAMPLES=OFF -DSTRATA_BUILD_BENCHMARKS=OFF -DSTRATA_ENABLE_CUDA=OFF)

run_sanitized() {  # folder, flags, label regex, targets...
  local folder=$1 flags=$2 label=$3
  shift 3
  cmake -S . -B "$folder" "${common[@]}" "-DCMAKE_CXX_FLAGS=-g1 $flags -fno-omit-frame-pointer -fno-sanitize-recover=all"
  cmake --build "$folder" -j "$(nproc)" --target "$@"
  ctest --test-dir "$folder" -L "$label" --output-on-failure -j "$(nproc)"
}
ASAN_OPTIONS=detect_leaks=1 run_sanitized build-asan "-O0 -fsanitize=address,undefined" "unit|threaded|simdev" \
  unit_tests threaded_tests simdev_tests
TSAN_OPTIONS=halt_on_error=1 run_sanitized build-tsan "-O1 -fsanitize=thread" "threaded|simdev" threaded_tests simdev_tests

cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
      -DSTRATA_BUILD_TESTS=OFF -DSTRATA_BUILD_EXAMPLES=OFF -DSTRATA_BUILD_BENCHMARKS=OFF -DSTRATA_BUILD_FUZZERS=ON \
      -DSTRATA_ENABLE_CUDA=OFF
fuzzers=(strategy_string checkpoint_reader safetensors_reader)
cmake --build build-fuzz -j "$(nproc)" --target "${fuzzers[@]/%/_fuzzer}"
# The fuzzers run side by side (one core each), each into its own log, shown as it ends.
pids=()
for target in "${fuzzers[@]}"; do
  corpus=build-fuzz/corpus/$target
  mkdir -p "$corpus"
  cp tests/fuzz/corpus/$target/* "$corpus/"
  build-fuzz/tests/fuzz/${target}_fuzzer -max_total_time="$fuzz_seconds" \
    -max_len="$([[ $target == strategy_string ]] && echo 256 || echo 4096)" "$corpus" > "build-fuzz/$target.log" 2>&1 &
  pids+=($!)
done
failed=0
for i in "${!fuzzers[@]}"; do
  status=0
  wait "${pids[$i]}" || status=$?
  echo "== ${fuzzers[$i]}_fuzzer (exit $status) =="
  tail -n 40 "build-fuzz/${fuzzers[$i]}.log"
  [[ $status -eq 0 ]] || failed=1
done
exit $failed
