// A vocabulary-parallel embedding splits its rows; a sparse table split by columns is refused.
// expect: SparseRowsSplitByRows
// expect: strata::TensorParallel<1>
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::SparseRows, strata::TensorParallel<1>>;
S* s;
