// expect: Axis must be a non-negative dimension index
// expect: strata::Partition<-1>
// leads by line: 8 (a policy checks its own arguments where Strategy<...> first completes the policy type: its header's include chain and that instantiation stand above the error)
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::Partition<-1>>;
S* s;
