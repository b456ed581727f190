#!/usr/bin/env bash
# The unit tests (loopback ranks as threads) under AddressSanitizer + UndefinedBehaviorSanitizer
# and under ThreadSanitizer, then the strategy-string fuzzer for FUZZ_SECONDS (default 60).
# Each runs in its own build folder; examples and benchmarks are not built here.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzz_seconds=${FUZZ_SECONDS:-60}
common=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_BUILD_EXAMPLES=OFF -DSTRATA_BUILD_BENCHMARKS=OFF)

run_sanitized() {  # folder, flags
  cmake -S . -B "$1" "${common[@]}" "-DCMAKE_CXX_FLAGS=$2 -fno-omit-frame-pointer -fno-sanitize-recover=all"
  cmake --build "$1" --target unit_tests -j "$(nproc)"
  ctest --test-dir "$1" -L unit --output-on-failure -j "$(nproc)"
}
ASAN_OPTIONS=detect_leaks=1 run_sanitized build-asan "-fsanitize=address,undefined"
TSAN_OPTIONS=halt_on_error=1 run_sanitized build-tsan "-fsanitize=thread"

cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
      -DSTRATA_BUILD_TESTS=OFF -DSTRATA_BUILD_EXAMPLES=OFF -DSTRATA_BUILD_BENCHMARKS=OFF -DSTRATA_BUILD_FUZZERS=ON
cmake --build build-fuzz --target strategy_string_fuzzer
corpus=build-fuzz/corpus/strategy_string
mkdir -p "$corpus"
cp tests/fuzz/corpus/strategy_string/* "$corpus/"
build-fuzz/tests/fuzz/strategy_string_fuzzer -max_total_time="$fuzz_seconds" -max_len=256 "$corpus"
