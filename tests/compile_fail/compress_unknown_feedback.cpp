// expect: Feedback must be ErrorFeedback or NoFeedback
// expect: strata::Compress<strata::FP16, int>
// leads by line: 8 (a policy checks its own arguments where Strategy<...> first completes the policy type: its header's include chain and that instantiation stand above the error)
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::Compress<strata::FP16, int>>;
S* s;
