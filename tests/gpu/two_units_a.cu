// The first of two units that include every kernel header (two_units.cuh says why).
#include <cstdio>

#include "two_units.cuh"

int main() {
  const int here = launchers_in_this_unit(), there = launchers_of_unit_b();
  std::printf("two units link: %d launchers here, %d there\n", here, there);
  return here == 4 && there == 4 ? 0 : 1;
}
