#pragma once
// strata's non-template code, for STRATA_SEPARATE_COMPILATION (see config.hpp): include this
// header in exactly one source file of a program, compiled with STRATA_SEPARATE_COMPILATION
// defined like every other. CMake: strata_add_compiled_library(<name>) makes that library.
#if !defined(STRATA_SEPARATE_COMPILATION)
#error "strata/impl/src.hpp is for STRATA_SEPARATE_COMPILATION; header-only programs need no compiled part"
#endif

#include "strata/ckpt/impl/exchange.ipp"
#include "strata/ckpt/impl/format.ipp"
#include "strata/ckpt/impl/safetensors.ipp"
#include "strata/ckpt/impl/store.ipp"
#include "strata/comm/mpi/impl/mpi.ipp"
#include "strata/detail/impl/outputs.ipp"
#include "strata/exec/impl/executor_core.ipp"
#include "strata/exec/impl/signature.ipp"
#include "strata/exec/impl/signature_check.ipp"
#include "strata/impl/timeout_setting.ipp"
#include "strata/optim/impl/hyper_parameters.ipp"
#include "strata/strategy/impl/canonical_string.ipp"
#include "strata/sync/impl/bucket_plan.ipp"
#include "strata/sync/impl/comm_thread.ipp"
#include "strata/sync/impl/partition.ipp"
#include "strata/trace/impl/timeline.ipp"

// The templates strata/impl/instances.hpp declares, instantiated here.
#include "strata/impl/instances.hpp"
namespace strata {
template class executor_core<mpi::context>;
template class executor_core<group_context<mpi::context>>;
template class sync::detail::ring_run<mpi::communicator, float, float>;
template class sync::detail::ring_run<mpi::communicator, float, half>;
template class sync::detail::ring_run<mpi::communicator, float, bfloat16>;
template struct sync::ring_workspace<mpi::communicator, float>;
template struct sync::ring_workspace<mpi::communicator, half>;
template struct sync::ring_workspace<mpi::communicator, bfloat16>;
template std::span<std::byte* const> process_segments::get(mpi::communicator&, std::size_t);
}  // namespace strata
