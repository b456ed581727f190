// Two policies of one category: the category and both policies are named.
// expect: at most one policy per category
// expect: more_than_one_policy_for_category<strata::category::placement, strata::Replicate, strata::PS<2> >
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::Replicate, strata::PS<2>>;
S* s;
