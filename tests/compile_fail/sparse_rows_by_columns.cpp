// expect: SparseRowsPartitionByRows
// expect: strata::Partition<1, 0>
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::PS<2>, strata::Partition<1>, strata::SparseRows>;
S* s;
