// expect: TopKNeedsDenseGradient
// expect: strata::TopK<
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::Compress<strata::TopK<0.01>>, strata::SparseRows>;
S* s;
