// expect: PowerSGD<Rank>: Rank must be at least 1
// expect: strata::PowerSGD<0>
// leads by line: 9 (a policy checks its own arguments where Strategy<...> first completes the policy type: its header's include chain and that instantiation stand above the error)
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::Compress<strata::PowerSGD<0>>>;
S* s;
