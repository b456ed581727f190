// A builder is asked about a scalar with SparseRows gradients: a scalar has no rows.
// expect: SparseRows gradients are rows of a table
// expect: give the variable at least one dimension
// leads by line: 7 (variable_traits checks its arguments where a builder's strategy_for first completes it, three instantiations down)
#include "strata/strategy/builders.hpp"
using S = strata::builder_strategy_t<strata::builder::Parallax<>, strata::variable_traits<strata::dims<>, strata::SparseRows>>;
S* s;
