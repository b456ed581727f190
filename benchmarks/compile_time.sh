#!/usr/bin/env bash
# Times the compilation of one translation unit that includes strata (default: the README's
# quickstart) with the build's own flags, alternating (A B A B ...), and prints medians and
# ratios as one summary line:
#   - header_only: strata as a header-only library (every definition in the unit);
#   - separate: under STRATA_SEPARATE_COMPILATION, the unit only (its definitions come from
#     strata::compiled, built once per program: compiled_library_s is that one unit's time);
#   - with BASELINE=<git revision>, that revision's headers too (header-only), for "before".
# Usage: bash benchmarks/compile_time.sh [source.cpp]   (ROUNDS=3, CXX=c++, OPT="-O3 -DNDEBUG -march=native")
set -euo pipefail
cd "$(dirname "$0")/.."
source_file=${1:-examples/quickstart/main.cpp}
rounds=${ROUNDS:-3}
cxx=${CXX:-c++}
read -r -a opt <<<"${OPT:--O3 -DNDEBUG -march=native}"
flags=(-DFMT_SHARED -DOMPI_SKIP_MPICXX -isystem /usr/lib/x86_64-linux-gnu/openmpi/include
       -isystem /usr/lib/x86_64-linux-gnu/openmpi/include/openmpi "${opt[@]}" -std=gnu++20 -c -o /dev/null)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
seconds() {  # seconds that compiling with the given extra flags takes
  local begin end
  begin=$(date +%s.%N)
  "$cxx" "${flags[@]}" "$@" >/dev/null 2>&1 || { echo "compile failed: $cxx ${flags[*]} $*" >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$end - $begin" | bc
}

variants=(header_only separate)
declare -A args=([header_only]="-Iinclude $source_file" [separate]="-DSTRATA_SEPARATE_COMPILATION -Iinclude $source_file")
if [ -n "${BASELINE:-}" ]; then
  mkdir -p "$work/baseline"
  git archive "$BASELINE" include | tar -x -C "$work/baseline"
  variants=(baseline "${variants[@]}")
  args[baseline]="-I$work/baseline/include $source_file"
fi
echo "compiling $source_file with: $cxx ${flags[*]} [-DSTRATA_SEPARATE_COMPILATION] -Iinclude"
declare -A times
for ((i = 0; i < rounds; ++i)); do
  line="round $i:"
  for v in "${variants[@]}"; do
    # shellcheck disable=SC2086
    t=$(seconds ${args[$v]})
    times[$v]+="$t "
    line+=" ${v}_s=$t"
  done
  echo "$line"
done
printf '#include "strata/impl/src.hpp"\n' >"$work/compiled.cpp"
library=$(seconds -DSTRATA_SEPARATE_COMPILATION -Iinclude "$work/compiled.cpp")

summary="summary: source=$source_file"
for v in "${variants[@]}"; do
  m=$(tr ' ' '\n' <<<"${times[$v]}" | grep . | median)
  declare "median_$v=$m"
  summary+=" ${v}_s=$m"
done
summary+=" compiled_library_s=$library separate_over_header_only=$(echo "scale=3; $median_separate / $median_header_only" | bc)"
if [ -n "${BASELINE:-}" ]; then
  summary+=" separate_over_baseline=$(echo "scale=3; $median_separate / $median_baseline" | bc) baseline=$BASELINE"
fi
echo "$summary"
