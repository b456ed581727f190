// expect: Feedback must be ErrorFeedback or NoFeedback
// expect: strata::Compress<strata::FP16, int>
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::Compress<strata::FP16, int>>;
S* s;
