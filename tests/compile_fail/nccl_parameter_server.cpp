// needs: nccl
// expect: ProbingForParameterServer
// expect: PS<N> needs a communicator that can probe
#include "strata/comm/nccl/nccl.hpp"
#include "strata/exec/synchronizer_table.hpp"
#include "strata/optim/sgd.hpp"
using namespace strata;
// The nccl communicator has collectives and point-to-point, but cannot probe.
using S = Strategy<PS<2>, Partition<0>>;
using Synchronizer = synchronizer_t<S, nccl::communicator, optim::sgd>;
Synchronizer* s;
