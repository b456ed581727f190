#pragma once
// strata: distributed training strategies as types.
//
// The umbrella header: policies, strategies and their builders, the model, the executor and the
// CPU backends.
//
// strategy.hpp comes first: a compile error in a strategy then shows a two-line include chain
// above the rule that was broken, not the chain through whichever header needed it first.
#include "strata/strategy/strategy.hpp"
//
#include "strata/ckpt/store.hpp"
#include "strata/comm/communicator.hpp"
#include "strata/comm/loopback/loopback.hpp"
#include "strata/comm/mpi/mpi.hpp"
#include "strata/comm/node_memory.hpp"
#include "strata/config.hpp"
#include "strata/error.hpp"
#include "strata/exec/executor.hpp"
#include "strata/exec/staged_executor.hpp"
#include "strata/impl/instances.hpp"
#include "strata/main.hpp"
#include "strata/model/build.hpp"
#include "strata/model/huge_pages.hpp"
#include "strata/model/model.hpp"
#include "strata/model/tensor_arena.hpp"
#include "strata/optim/dense_and_sparse.hpp"
#include "strata/optim/optimizer.hpp"
#include "strata/parallel/mesh.hpp"
#include "strata/parallel/pipeline.hpp"
#include "strata/parallel/tensor_parallel.hpp"
#include "strata/policy/policies.hpp"
#include "strata/strategy/canonical_string.hpp"
#include "strata/strategy/select.hpp"
