// The second of two units that include every kernel header (two_units.cuh says why).
#include "two_units.cuh"

int launchers_of_unit_b() { return launchers_in_this_unit(); }
