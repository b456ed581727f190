// expect: Algorithm must be one of Ring, Tree, Hierarchical, Native
// expect: strata::AllReduce<int>
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::AllReduce<int>>;
S* s;
