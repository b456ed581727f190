// expect: Codec must be one of None, FP16, BF16, TopK<Ratio>, PowerSGD<Rank>
// expect: strata::Compress<float>
// leads by line: 8 (a policy checks its own arguments where Strategy<...> first completes the policy type: its header's include chain and that instantiation stand above the error)
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::Compress<float>>;
S* s;
