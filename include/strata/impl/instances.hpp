#pragma once
// Templates that every MPI program instantiates alike: they depend on the backend (and an
// element type), not on the model's strategies. Under STRATA_SEPARATE_COMPILATION they are
// instantiated once, in strata's compiled part (strata/impl/src.hpp), and these declarations
// keep the units that include strata.hpp from compiling them again; a header-only program
// instantiates them where it uses them, as any template.
#include <cstddef>
#include <span>

#include "strata/comm/mpi/mpi.hpp"
#include "strata/comm/shared_memory.hpp"
#include "strata/config.hpp"
#include "strata/exec/executor_core.hpp"
#include "strata/numeric/float16.hpp"
#include "strata/parallel/mesh.hpp"
#include "strata/sync/allreduce/ring.hpp"

#if !defined(STRATA_HEADER_ONLY)
namespace strata {
extern template class executor_core<mpi::context>;                 // make_executor(context, ...)
extern template class executor_core<group_context<mpi::context>>;  // make_executor(mesh, ...)
// The ring (AllReduce<Ring>, and the parameter server's and Hierarchical's rings): its
// schedule over fp32 data, sent as fp32 or as Compress<FP16|BF16>'s 16 bits.
extern template class sync::detail::ring_run<mpi::communicator, float, float>;
extern template class sync::detail::ring_run<mpi::communicator, float, half>;
extern template class sync::detail::ring_run<mpi::communicator, float, bfloat16>;
extern template struct sync::ring_workspace<mpi::communicator, float>;
extern template struct sync::ring_workspace<mpi::communicator, half>;
extern template struct sync::ring_workspace<mpi::communicator, bfloat16>;
// Shared-memory segments of the ranks on one machine (the ring's landing slots).
extern template std::span<std::byte* const> process_segments::get(mpi::communicator&, std::size_t);
}  // namespace strata
#endif
