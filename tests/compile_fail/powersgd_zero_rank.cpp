// expect: PowerSGD<Rank>: Rank must be at least 1
// expect: strata::PowerSGD<0>
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::Compress<strata::PowerSGD<0>>>;
S* s;
