// expect: Algorithm must be one of Ring, Tree, Hierarchical, Native
// expect: strata::AllReduce<int>
// leads by line: 8 (a policy checks its own arguments where Strategy<...> first completes the policy type: its header's include chain and that instantiation stand above the error)
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::AllReduce<int>>;
S* s;
