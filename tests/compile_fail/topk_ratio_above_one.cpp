// expect: Ratio is the kept fraction and must lie in (0, 1
// expect: strata::TopK<1.5e+0>
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::Compress<strata::TopK<1.5>>>;
S* s;
