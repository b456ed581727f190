// expect: Ratio is the kept fraction and must lie in (0, 1
// expect: strata::TopK<1.5e+0>
// leads by line: 9 (a policy checks its own arguments where Strategy<...> first completes the policy type: its header's include chain and that instantiation stand above the error)
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::Compress<strata::TopK<1.5>>>;
S* s;
