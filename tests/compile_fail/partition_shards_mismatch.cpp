// expect: PartitionShardsFollowParameterServer
// expect: strata::PS<4>, strata::Partition<0, 3>
#include "strata/strategy/strategy.hpp"
using S = strata::Strategy<strata::PS<4>, strata::Partition<0, 3>>;
S* s;
