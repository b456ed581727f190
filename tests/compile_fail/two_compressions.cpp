// expect: at most one policy per category
// expect: more_than_one_policy_for_category<strata::category::compression, strata::Compress<strata::FP16, strata::NoFeedback>, strata::Compress<strata::BF16
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::Compress<strata::FP16>, strata::AllReduce<strata::Ring>, strata::Compress<strata::BF16>>;
S* s;
