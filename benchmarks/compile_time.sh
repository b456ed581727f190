#!/usr/bin/env bash
# Times the compilation of one translation unit that includes strata (default: the README's
# quickstart) with the build's own flags, alternating (A B A B ...), and prints medians and
# ratios as one summary line:
#   - header_only: strata as a header-only library (every definition in the unit);
#   - separate: under STRATA_SEPARATE_COMPILATION, the unit only (its definitions come from
#     strata::compiled, built once per program: compiled_library_s is that one unit's time);
#   - separate_pch: as separate, with strata.hpp precompiled (strata_precompile_headers;
#     pch_s is the time to build the precompiled header, once per program and flags);
#   - with BASELINE=<git revision>, that revision's headers too (header-only), for "before".
# Usage: bash benchmarks/compile_time.sh [source.cpp]   (ROUNDS=3, CXX=c++, OPT="-O3 -DNDEBUG -march=native")
set -euo pipefail
cd "$(dirname "$0")/.."
source_file=${1:-examples/quickstart/main.cpp}
rounds=${ROUNDS:-3}
cxx=${CXX:-c++}
read -r -a opt <<<"${OPT--O3 -DNDEBUG -march=native}"  # OPT="": no optimization (CMake without a build type)
flags=(-DFMT_SHARED -DOMPI_SKIP_MPICXX -isystem /usr/lib/x86_64-linux-gnu/openmpi/include
       -isystem /usr/lib/x86_64-linux-gnu/openmpi/include/openmpi "${opt[@]}" -std=gnu++20)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

source benchmarks/stats.sh  # median
seconds() {  # seconds that compiling with the given extra flags takes (output: -o, or none)
  local begin end
  begin=$(date +%s.%N)
  local out=(-c -o /dev/null)
  if [[ " $* " == *" -o "* ]]; then out=(); fi
  "$cxx" "${flags[@]}" "${out[@]}" "$@" >/dev/null 2>&1 || { echo "compile failed: $cxx ${flags[*]} $*" >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$end - $begin" | bc
}

# The precompiled header: GCC takes strata.hpp.gch in place of the strata.hpp that
# -include names, when the flags match (-Winvalid-pch says why not otherwise).
mkdir -p "$work/pch/strata"
printf '#pragma once\n#include "%s/include/strata/strata.hpp"\n' "$PWD" >"$work/pch/strata/strata.hpp"
pch=$(seconds -DSTRATA_SEPARATE_COMPILATION -Iinclude -x c++-header "$work/pch/strata/strata.hpp" -o "$work/pch/strata/strata.hpp.gch")

variants=(header_only separate separate_pch)
declare -A args=([header_only]="-Iinclude $source_file" [separate]="-DSTRATA_SEPARATE_COMPILATION -Iinclude $source_file"
                 [separate_pch]="-DSTRATA_SEPARATE_COMPILATION -Iinclude -Winvalid-pch -Werror=invalid-pch -include $work/pch/strata/strata.hpp $source_file")
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
summary+=" compiled_library_s=$library pch_s=$pch"
summary+=" separate_over_header_only=$(echo "scale=3; $median_separate / $median_header_only" | bc)"
summary+=" separate_pch_over_header_only=$(echo "scale=3; $median_separate_pch / $median_header_only" | bc)"
if [ -n "${BASELINE:-}" ]; then
  summary+=" separate_over_baseline=$(echo "scale=3; $median_separate / $median_baseline" | bc)"
  summary+=" separate_pch_over_baseline=$(echo "scale=3; $median_separate_pch / $median_baseline" | bc) baseline=$BASELINE"
fi
summary+=" opt=\"${opt[*]}\""
echo "$summary"
