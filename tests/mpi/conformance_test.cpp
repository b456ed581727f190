// The loopback conformance cases, now across real processes.
#include <filesystem>

#include <catch2/catch.hpp>
#include <unistd.h>

#include "conformance/cases.hpp"
#include "conformance/mismatch_cases.hpp"
#include "conformance/ps_cases.hpp"
#include "conformance/staged_cases.hpp"

namespace strata::testing {
extern mpi::context* context;
}

using namespace strata;
using testing::context;

namespace {
// Simulated nodes of 2 ranks where the ranks divide into them; else the machine is one node.
int two_rank_nodes() { return context->size() % 2 == 0 ? 2 : 0; }
}  // namespace

TEMPLATE_TEST_CASE("mpi: all-reduce sums exactly", "[mpi][allreduce]", float, double) {
  CHECK_NOTHROW(conformance::allreduce_sums_exactly<Ring, TestType>(*context));
  CHECK_NOTHROW(conformance::allreduce_sums_exactly<Ring, TestType>(*context, 0, false));  // as messages
  CHECK_NOTHROW(conformance::allreduce_sums_exactly<Native, TestType>(*context));
  CHECK_NOTHROW(conformance::allreduce_sums_exactly<Tree, TestType>(*context));
  CHECK_NOTHROW(conformance::allreduce_sums_exactly<Hierarchical, TestType>(*context));
  CHECK_NOTHROW(conformance::allreduce_sums_exactly<Hierarchical, TestType>(*context, two_rank_nodes()));
  // The node's ranks reading each other's memory (cross-memory attach) instead of rings.
  CHECK_NOTHROW(conformance::allreduce_sums_exactly<Hierarchical, TestType>(*context, two_rank_nodes(), false, true));
  // ... and seeing it in place, where it is node memory.
  CHECK_NOTHROW(
      conformance::allreduce_sums_exactly<Hierarchical, TestType>(*context, two_rank_nodes(), false, true, true));
}

TEST_CASE("mpi: a rank reads another's memory on this machine, range by range", "[mpi][communicator]") {
  auto& comm = context->collectives();
  REQUIRE(comm.peer_reads());  // one machine, the same user: the kernel allows it
  // Each rank's two buffers; the ranks learn each other's addresses.
  std::vector<std::int32_t> first(1000), second(37);
  for (std::size_t i = 0; i < first.size(); ++i) first[i] = static_cast<std::int32_t>(comm.rank() * 100000 + i);
  for (std::size_t i = 0; i < second.size(); ++i) second[i] = static_cast<std::int32_t>(-comm.rank() * 100000 - i);
  const std::uint64_t mine[2] = {reinterpret_cast<std::uintptr_t>(first.data()),
                                 reinterpret_cast<std::uintptr_t>(second.data())};
  std::vector<std::uint64_t> all(2 * static_cast<std::size_t>(comm.size()));
  comm.allgather(std::span<const std::uint64_t>(mine), std::span<std::uint64_t>(all));
  const int peer = (comm.rank() + 1) % comm.size();
  // The peer's elements 990-999 of its first buffer, then 0-4 of its second, in one read.
  const peer_range ranges[2] = {{static_cast<std::uintptr_t>(all[2 * peer]) + 990 * sizeof(std::int32_t), 40},
                                {static_cast<std::uintptr_t>(all[2 * peer + 1]), 20}};
  std::vector<std::int32_t> got(15);
  comm.read_peer(peer, ranges, std::as_writable_bytes(std::span<std::int32_t>(got)));
  for (std::size_t i = 0; i < 10; ++i) CHECK(got[i] == peer * 100000 + 990 + static_cast<std::int32_t>(i));
  for (std::size_t i = 0; i < 5; ++i) CHECK(got[10 + i] == -peer * 100000 - static_cast<std::int32_t>(i));
  comm.barrier();  // the peer's buffers stay until every rank has read them
}

TEST_CASE("mpi: a rank sees another's node memory in place, and no other memory", "[mpi][communicator]") {
  auto& comm = context->collectives();
  REQUIRE(comm.peer_reads());
  node_vector<std::int32_t> shared(3000);  // over a page: a view must reach past the first
  std::vector<std::int32_t> private_memory(10);
  for (std::size_t i = 0; i < shared.size(); ++i) shared[i] = static_cast<std::int32_t>(comm.rank() * 100000 + i);
  const shared_region mine = comm.region_of(shared.data() + 2500);
  REQUIRE(mine.id != 0);
  CHECK(comm.region_of(private_memory.data()).id == 0);
  const std::uint64_t said[5] = {mine.id, static_cast<std::uint64_t>(mine.handle), mine.begin, mine.bytes,
                                 reinterpret_cast<std::uintptr_t>(shared.data() + 2500)};
  std::vector<std::uint64_t> all(5 * static_cast<std::size_t>(comm.size()));
  comm.allgather(std::span<const std::uint64_t>(said), std::span<std::uint64_t>(all));
  const int peer = (comm.rank() + 1) % comm.size();
  const std::uint64_t* theirs = all.data() + 5 * peer;
  const shared_region region{theirs[0], static_cast<std::int64_t>(theirs[1]), theirs[2], theirs[3]};
  const std::byte* at = comm.view_peer(peer, region, theirs[4]);
  REQUIRE(at != nullptr);
  const auto* values = reinterpret_cast<const std::int32_t*>(at);
  for (std::size_t i = 0; i < 500; ++i) CHECK(values[i] == peer * 100000 + 2500 + static_cast<std::int32_t>(i));
  CHECK(comm.view_peer(peer, shared_region{}, theirs[4]) == nullptr);  // not node memory: read it instead
  comm.barrier();  // the peer's memory stays until every rank has seen it
}

TEST_CASE("mpi: all-reduce averages a bucket of several buffers", "[mpi][allreduce]") {
  CHECK_NOTHROW(conformance::allreduce_averages_buffer_lists<Ring>(*context));
  CHECK_NOTHROW(conformance::rings_of_any_shape_follow_each_other(*context));
  CHECK_NOTHROW(conformance::allreduce_averages_buffer_lists<Native>(*context));
  CHECK_NOTHROW(conformance::allreduce_averages_buffer_lists<Tree>(*context));
  CHECK_NOTHROW(conformance::allreduce_averages_buffer_lists<Hierarchical>(*context, two_rank_nodes()));
}

TEST_CASE("mpi: hierarchical and tree results equal the flat result", "[mpi][allreduce]") {
  CHECK_NOTHROW(conformance::allreduce_agrees_with_ring<Hierarchical>(
      *context, {.ring_chunk_bytes = 256, .ranks_per_node = two_rank_nodes(), .cross_node_chunk_bytes = 96,
                 .hierarchical_piece_bytes = 4096}));
  CHECK_NOTHROW(conformance::allreduce_agrees_with_ring<Tree>(*context, {}));
}

TEST_CASE("mpi: hierarchical all-reduce rejects nodes of different sizes", "[mpi][allreduce]") {
  if (context->size() < 3) return;  // nodes of size - 1 and 1 ranks
  CHECK_THROWS_WITH((conformance::allreduce_sums_exactly<Hierarchical, float>(*context, context->size() - 1)),
                    Catch::Contains("same number of ranks on every node"));
}

TEMPLATE_TEST_CASE("mpi: allgather collects every rank's block", "[mpi][communicator]", float, double, std::byte,
                   std::int32_t) {
  CHECK_NOTHROW(conformance::allgather_collects_every_rank<TestType>(*context));
}

TEST_CASE("mpi: split forms groups and isolates their traffic", "[mpi][communicator]") {
  CHECK_NOTHROW(conformance::split_forms_groups(*context));
  CHECK_NOTHROW(conformance::split_isolates_traffic(*context));
}

TEST_CASE("mpi: ranks that differ in any setting are told which setting and which ranks", "[mpi][signature]") {
  CHECK_NOTHROW(conformance::every_differing_setting_is_refused(*context));
}

TEST_CASE("mpi: replicas stay bitwise identical", "[mpi][executor]") {
  CHECK_NOTHROW(conformance::replicas_stay_bitwise_identical<Ring>(*context));
  CHECK_NOTHROW(conformance::replicas_stay_bitwise_identical<Native>(*context));
}

TEST_CASE("mpi: the executor averages gradients", "[mpi][executor]") {
  CHECK_NOTHROW(conformance::executor_averages_gradients<Ring>(*context));
  CHECK_NOTHROW(conformance::executor_averages_gradients<Native>(*context));
}

TEST_CASE("mpi: the context reports ranks and local ranks", "[mpi]") {
  CHECK(context->size() >= 1);
  CHECK(context->local_size() == context->size());  // one machine
  CHECK(context->local_rank() == context->rank());
  CHECK(context->collectives().native_handle() != context->control().native_handle());
  const int color = context->collectives().node_color();  // one machine: one color
  std::vector<int> colors(static_cast<std::size_t>(context->size()));
  context->control().allgather(std::span<const int>(&color, 1), std::span<int>(colors));
  CHECK(std::ranges::count(colors, color) == context->size());
  CHECK_FALSE(context->collectives().spans_machines());  // so waits yield, not nap
  CHECK_FALSE(context->collectives().split(context->rank() % 2, context->rank()).spans_machines());
}

TEST_CASE("mpi: compressed and partitioned strategies keep replicas bitwise identical", "[mpi][compression]") {
  CHECK_NOTHROW(conformance::replicas_stay_bitwise_identical<Ring, mpi::context, Compress<FP16>>(*context));
  CHECK_NOTHROW(conformance::replicas_stay_bitwise_identical<Native, mpi::context, Compress<BF16, ErrorFeedback>>(*context));
  CHECK_NOTHROW(conformance::replicas_stay_bitwise_identical<Ring, mpi::context, Compress<TopK<0.05>, ErrorFeedback>>(*context));
  CHECK_NOTHROW(conformance::replicas_stay_bitwise_identical<Native, mpi::context, Compress<PowerSGD<2>, ErrorFeedback>>(*context));
  CHECK_NOTHROW(conformance::replicas_stay_bitwise_identical<Ring, mpi::context, Partition<0>>(*context));
  CHECK_NOTHROW(conformance::replicas_stay_bitwise_identical<Tree, mpi::context, Compress<FP16, ErrorFeedback>>(*context));
  CHECK_NOTHROW(conformance::replicas_stay_bitwise_identical<Hierarchical, mpi::context, Compress<TopK<0.1>>>(*context));
  CHECK_NOTHROW(
      conformance::replicas_stay_bitwise_identical<Hierarchical, mpi::context, Compress<BF16, ErrorFeedback>>(*context));
}

TEST_CASE("mpi: FP16 and BF16 averages are within rounding", "[mpi][compression]") {
  CHECK_NOTHROW(conformance::cast_compression_is_close<FP16, Ring>(*context, 2e-3));
  CHECK_NOTHROW(conformance::cast_compression_is_close<FP16, Native>(*context, 2e-3));
  CHECK_NOTHROW(conformance::cast_compression_is_close<BF16, Ring>(*context, 1.6e-2));
  CHECK_NOTHROW(conformance::cast_compression_is_close<FP16, Hierarchical>(*context, 2e-3));
  CHECK_NOTHROW(conformance::cast_compression_is_close<BF16, Tree>(*context, 1.6e-2));
}

TEST_CASE("mpi: error feedback keeps every rounding of the ring and of Hierarchical's rings", "[mpi][compression]") {
  // Simulated nodes where the ranks divide into them (np4), else one ring (np2, np3).
  // Chunks through shared memory or as messages; then the node's ranks reading each other's memory.
  for (const int mode : {0, 1, 2}) {
    const sync::allreduce_options nodes{.ring_chunk_bytes = 10, .shared_memory_max_bytes = mode == 0 ? SIZE_MAX : 0,
                                        .ranks_per_node = two_rank_nodes(), .cross_node_chunk_bytes = 6,
                                        .hierarchical_piece_bytes = 300, .read_within_node = mode == 2};
    CHECK_NOTHROW(conformance::cast_feedback_keeps_what_rounding_lost<FP16, Hierarchical>(*context, nodes));
    CHECK_NOTHROW(conformance::cast_feedback_keeps_what_rounding_lost<BF16, Hierarchical>(*context, nodes));
    CHECK_NOTHROW(conformance::cast_feedback_keeps_what_rounding_lost<FP16, Ring>(*context, nodes));
  }
}

TEST_CASE("mpi: parameter server push and pull over uneven shards", "[mpi][ps]") {
  CHECK_NOTHROW(conformance::ps_push_pull_uneven_shards(*context));
}

TEST_CASE("mpi: server-side optimizers match the local optimizer on the mean gradient", "[mpi][ps]") {
  CHECK_NOTHROW(conformance::ps_server_optimizer_matches_reference(*context, optim::adam{.lr = 0.01f}));
  CHECK_NOTHROW(conformance::ps_server_optimizer_matches_reference(*context, optim::adagrad{.lr = 0.1f}));
}

TEST_CASE("mpi: PS optimizer state is sharded over the servers (balanced, or all on rank 0)", "[mpi][ps]") {
  CHECK_NOTHROW(conformance::ps_optimizer_state_is_sharded(*context, server_assignment::least_loaded));
  CHECK_NOTHROW(conformance::ps_optimizer_state_is_sharded(*context, server_assignment::first_server));
}

TEST_CASE("mpi: a PS checkpoint saved by every host restores into another shard placement", "[mpi][ps][checkpoint]") {
  // One folder for all ranks, named after rank 0's process.
  std::int64_t pid = ::getpid();
  context->control().broadcast(std::as_writable_bytes(std::span(&pid, 1)), 0);
  const auto folder = std::filesystem::temp_directory_path() / fmt::format("strata-mpi-ps-ckpt-{}", pid);
  CHECK_NOTHROW(conformance::ps_checkpoint_restores_into_another_placement(*context, folder));
  context->control().barrier();
  if (context->rank() == 0) std::filesystem::remove_all(folder);
}

TEST_CASE("mpi: sparse rows combine duplicates and average over ranks", "[mpi][ps]") {
  CHECK_NOTHROW(conformance::sparse_rows_combine_duplicates<conformance::PSSparse>(*context));
}

TEST_CASE("mpi: a BSP server merges pushes that overlap, are disjoint or empty, row by row", "[mpi][ps]") {
  CHECK_NOTHROW(conformance::sparse_bsp_pushes_merge_by_row(*context));
}

TEST_CASE("mpi: sparse pushes posted without pulls between them all arrive, in order", "[mpi][ps]") {
  CHECK_NOTHROW(conformance::sparse_pushes_without_pulls_all_arrive<conformance::PSSparse>(*context));
  CHECK_NOTHROW(conformance::sparse_pushes_without_pulls_all_arrive<conformance::PSSparse>(*context, 16384));  // 64 KiB rows
}

TEST_CASE("mpi: replicated sparse rows are all-gathered, combined and averaged", "[mpi][sparse]") {
  CHECK_NOTHROW(conformance::sparse_rows_combine_duplicates<Strategy<AllReduce<Ring>, SparseRows>>(*context));
}

TEST_CASE("mpi: dense_and_sparse gives dense variables Adam and sparse ones Adagrad", "[mpi][ps]") {
  CHECK_NOTHROW(conformance::dense_and_sparse_optimizers_by_variable(*context));
}

TEST_CASE("mpi: PS under BSP trains like all-reduce", "[mpi][ps]") {
  CHECK_NOTHROW(conformance::ps_bsp_equals_allreduce(*context));
}

TEST_CASE("mpi: every SSP read is within its staleness bound under random delays", "[mpi][ps]") {
  std::uint64_t lag = 0;
  CHECK_NOTHROW(lag = conformance::ssp_bound_holds<2>(*context, 11, 40));
  CHECK(lag <= 2);
}

TEST_CASE("mpi: PS gradient accumulation updates as one batch of the mean", "[mpi][ps]") {
  CHECK_NOTHROW(conformance::ps_accumulation_equals_mean(*context));
}

TEST_CASE("mpi: a worker blocked by SSP sleeps instead of spinning in MPI", "[mpi][ps]") {
  double share = 1.0;
  CHECK_NOTHROW(share = conformance::blocked_worker_cpu_share(*context));
  INFO("rank " << context->rank() << " used " << share << " of a core while blocked");
  CHECK(share < 0.1);
}

TEST_CASE("mpi: ranks that declare different models fail on every rank, naming the ranks", "[mpi][reliability]") {
  std::vector<float> w(12), g(12);
  const bool odd_one_out = context->rank() == context->size() - 1;
  auto m = make_model(variable<Strategy<AllReduce<Ring>>>("fc.weight", w, g, {odd_one_out ? 4u : 3u, odd_one_out ? 3u : 4u}));
  CHECK_THROWS_WITH(make_executor(*context, m, optim::sgd{}),
                    Catch::Contains(fmt::format("[3,4] float32 Replicate,AllReduce<Ring> on rank 0 but variable "
                                                "\"fc.weight\" [4,3] float32 Replicate,AllReduce<Ring> on rank {}",
                                                context->size() - 1)));
}

TEST_CASE("mpi: a non-finite gradient on one rank is caught on every rank", "[mpi][reliability]") {
  for (auto policy : {sync::nonfinite_policy::raise, sync::nonfinite_policy::skip_step}) {
    std::vector<float> w(8, 1.0f), g(8, 0.5f);
    auto m = make_model(variable<Strategy<AllReduce<Ring>, Compress<FP16>>>("fc.weight", w, g, {2, 4}));
    executor_options options;
    options.compression.on_nonfinite = policy;
    auto exec = make_executor(*context, m, optim::sgd{.lr = 1.0f}, options);
    if (context->rank() == context->size() - 1) g[3] = std::numeric_limits<float>::quiet_NaN();
    if (policy == sync::nonfinite_policy::raise) {
      CHECK_THROWS_WITH(exec.step(), Catch::Contains("the averaged gradient of \"fc.weight\" is NaN or infinite"));
    } else {
      const step_stats s = exec.step();
      CHECK((s.skipped && !s.updated && w[3] == 1.0f));
    }
  }
}

TEST_CASE("mpi: a staged executor trains as the host executor on host buffers", "[mpi][staged]") {
  CHECK_NOTHROW(conformance::staged_equals_direct(*context, host_stage{}, conformance::host_buffers()));
}

TEST_CASE("mpi: SSP through a stage reads within its bound and copies what it read", "[mpi][staged][ps]") {
  // P = 2 or 4: the case's expected values are exact for a power of two.
  CHECK_NOTHROW(conformance::staged_ssp_reads_within_bound<1>(*context, host_stage{}, conformance::host_buffers(), 5, 24));
}
