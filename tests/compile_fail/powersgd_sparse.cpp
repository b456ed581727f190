// expect: LowRankCompressionNeedsDenseGradient
// expect: strata::Compress<strata::PowerSGD<4>, strata::NoFeedback>
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::Compress<strata::PowerSGD<4>>, strata::SparseRows>;
S* s;
