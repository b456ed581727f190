// expect: Codec must be one of None, FP16, BF16, TopK<Ratio>, PowerSGD<Rank>
// expect: strata::Compress<float>
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::Compress<float>>;
S* s;
