// expect: at most one policy per category
// expect: more_than_one_policy_for_category<strata::category::tensor, strata::TensorParallel<0>, strata::TensorParallel<1> >
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::TensorParallel<0>, strata::TensorParallel<1>>;
S* s;
