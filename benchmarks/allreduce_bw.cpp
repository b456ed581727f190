// All-reduce bus bandwidth: strata's AllReduce<Ring>, <Tree>, <Hierarchical> and <Native>
// against a raw MPI_Allreduce on the same buffer, 4 KiB to 128 MiB, interleaved.
//
//   mpirun -np 2 ./allreduce_bw
//
// busbw = bytes / time * 2(n-1)/n (nccl-tests' definition), medians over rounds. Across
// hosts, --link-gbit gives the links' rate and the summary the ring's share of it. Within
// a machine the ring's chunks of buffers up to --shared-max-kib go through shared memory;
// "msgs" is the same ring sending them as MPI messages at every size. Hierarchical's node
// ranks read each other's memory where they may; "hmsgs" is it with rings in the node,
// "hnode" it over node memory (comm/node_memory.hpp), which the node's ranks see in place.
// --versus-piece-kib K times Hierarchical in pieces of K KiB too, alternated with the rest.
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <strata/strata.hpp>

#include "measure.hpp"
#include "../examples/common/cli.hpp"
#include "../examples/common/rank_main.hpp"

namespace {
using strata::mpi::communicator;

double bus_gbps(std::size_t bytes, double seconds, int ranks) {
  return static_cast<double>(bytes) / seconds * 2.0 * (ranks - 1) / ranks / 1e9;
}
}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  constexpr strata::sync::allreduce_options defaults{};
  std::size_t min_bytes = std::size_t{4} << 10, max_bytes = std::size_t{128} << 20;
  std::size_t chunk_kib = defaults.ring_chunk_bytes >> 10, window = defaults.ring_window,
              shared_chunk_kib = defaults.shared_memory_chunk_bytes >> 10,
              shared_max_kib = defaults.shared_memory_max_bytes >> 10;
  std::size_t cross_chunk_kib = defaults.cross_node_chunk_bytes >> 10, cross_window = defaults.cross_node_window,
              piece_kib = defaults.hierarchical_piece_bytes >> 10, versus_piece_kib = 0;
  double link_gbit = 0.0;
  int rounds = 9;
  CLI::App app{"all-reduce bus bandwidth: strata vs MPI_Allreduce"};
  app.add_flag("--quick", quick, "small sizes, few rounds (smoke test)");
  constexpr std::size_t largest = std::size_t{1} << 31;
  examples::number(app, "--min-bytes", min_bytes, std::size_t{8}, largest, "smallest buffer");
  examples::number(app, "--max-bytes", max_bytes, std::size_t{8}, largest, "largest buffer");
  examples::number(app, "--rounds", rounds, 1, 1000, "interleaved rounds per size (medians are taken over them)");
  examples::number(app, "--chunk-kib", chunk_kib, std::size_t{1}, std::size_t{1} << 20, "ring chunk size (messages)");
  examples::number(app, "--shared-chunk-kib", shared_chunk_kib, std::size_t{1}, std::size_t{1} << 20,
                   "ring chunk size through shared memory");
  examples::number(app, "--shared-max-kib", shared_max_kib, std::size_t{0}, std::size_t{1} << 21,
                   "largest buffer the ring sends through shared memory (0: none)");
  examples::number(app, "--window", window, std::size_t{1}, std::size_t{1024}, "ring chunks in flight");
  examples::number(app, "--cross-chunk-kib", cross_chunk_kib, std::size_t{1}, std::size_t{1} << 20,
                   "hierarchical: the chunk of the ring between nodes");
  examples::number(app, "--cross-window", cross_window, std::size_t{1}, std::size_t{1024},
                   "hierarchical: chunks in flight between nodes");
  examples::number(app, "--link-gbit", link_gbit, 0.0, 1e6,
                   "the rate of the links between hosts (Gbit/s): the summary then gives the ring's share of it");
  examples::number(app, "--piece-kib", piece_kib, std::size_t{0}, std::size_t{1} << 21,
                   "hierarchical: pieces the ring between nodes sums while the rings within work on others (0: one)");
  examples::number(app, "--versus-piece-kib", versus_piece_kib, std::size_t{0}, std::size_t{1} << 21,
                   "hierarchical: also time pieces of this size, alternated with --piece-kib's (0: no)");
  return examples::parse_and_run(app, argc, argv, "allreduce_bw", [&](strata::mpi::context& ctx) {
    if (min_bytes > max_bytes)
      throw examples::flag_error("--min-bytes", fmt::format("{} is above --max-bytes {}", min_bytes, max_bytes));
    if (quick) {
      max_bytes = std::min<std::size_t>(max_bytes, 4 << 20);
      rounds = 3;
    }

    communicator& comm = ctx.collectives();
    const int ranks = comm.size();
    const strata::sync::allreduce_options options{.ring_chunk_bytes = chunk_kib << 10,
                                                  .ring_window = window,
                                                  .shared_memory_max_bytes = shared_max_kib << 10,
                                                  .shared_memory_chunk_bytes = shared_chunk_kib << 10,
                                                  .cross_node_chunk_bytes = cross_chunk_kib << 10,
                                                  .cross_node_window = cross_window,
                                                  .hierarchical_piece_bytes = piece_kib << 10};
    strata::sync::allreduce<strata::Ring, communicator, float> ring(options);
    strata::sync::allreduce_options as_messages = options;
    as_messages.shared_memory_max_bytes = 0;
    strata::sync::allreduce<strata::Ring, communicator, float> ring_messages(as_messages);
    strata::sync::allreduce<strata::Native, communicator, float> native(options);
    strata::sync::allreduce<strata::Tree, communicator, float> tree(options);
    strata::sync::allreduce<strata::Hierarchical, communicator, float> hierarchical(options);
    strata::sync::allreduce_options node_rings = options;
    node_rings.read_within_node = false;
    strata::sync::allreduce<strata::Hierarchical, communicator, float> hierarchical_rings(node_rings);
    strata::sync::allreduce_options other_pieces = options;
    other_pieces.hierarchical_piece_bytes = versus_piece_kib << 10;
    strata::sync::allreduce<strata::Hierarchical, communicator, float> hierarchical_other_pieces(other_pieces);

    if (ctx.rank() == 0)
      fmt::print("{:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>10} {:>10} {:>9} {:>10} {:>10}"
                 "   (bus "
                 "bandwidth GB/s, medians; {} ranks)\n",
                 "bytes", "ring", "msgs", "tree", "hier", "hmsgs", "hnode", "native", "MPI", "ring/MPI", "nat/MPI",
                 "tree/ring", "hier/ring", "ring/msgs", "hier/hmsgs", "hnode/ring", ranks);
    double ring_vs_mpi_64m = 0.0, native_vs_mpi_64m = 0.0, worst_ring_ge_1m = 1e9, worst_tree_below_64k = 1e9,
           worst_hier_ge_16m = 1e9, worst_ring_link_ge_16m = 1e9, worst_ring_vs_messages = 1e9,
           worst_hier_vs_rings_ge_16m = 1e9, worst_hier_node_ge_16m = 1e9, worst_pieces_vs_other_ge_16m = 1e9;
    for (std::size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
      const std::size_t n = bytes / sizeof(float);
      strata::host_vector<float> a(n, 1.0f), b(n, 1.0f), c(n, 1.0f), d(n, 1.0f), e(n, 1.0f), f(n, 1.0f), g(n, 1.0f);
      strata::host_vector<float> i(versus_piece_kib > 0 ? n : 0, 1.0f);
      strata::node_vector<float> h(n, 1.0f);
      const strata::sync::span_list<float> ring_buffer({std::span<float>(a)}), native_buffer({std::span<float>(b)}),
          tree_buffer({std::span<float>(d)}), hierarchical_buffer({std::span<float>(e)}),
          messages_buffer({std::span<float>(f)}), node_rings_buffer({std::span<float>(g)}),
          node_memory_buffer({std::span<float>(h)}), other_pieces_buffer({std::span<float>(i)});
      std::vector<bench::contender> contenders = {
          {"ring", [&] { ring(comm, ring_buffer, 1.0f); }},
          {"ring as messages", [&] { ring_messages(comm, messages_buffer, 1.0f); }},
          {"native", [&] { native(comm, native_buffer, 1.0f); }},
          {"tree", [&] { tree(comm, tree_buffer, 1.0f); }},
          {"hierarchical", [&] { hierarchical(comm, hierarchical_buffer, 1.0f); }},
          {"hierarchical, rings in the node", [&] { hierarchical_rings(comm, node_rings_buffer, 1.0f); }},
          {"mpi", [&] { MPI_Allreduce(MPI_IN_PLACE, c.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm.native_handle()); }},
          {"hierarchical, node memory", [&] { hierarchical(comm, node_memory_buffer, 1.0f); }},
      };
      if (versus_piece_kib > 0)
        contenders.push_back({"hierarchical, other pieces", [&] { hierarchical_other_pieces(comm, other_pieces_buffer, 1.0f); }});
      // A round moves at least 64 MiB: rounds of a few calls between barriers measured the
      // barrier and the scheduler as much as the all-reduce (ring/MPI swung by 10% at 1-8 MiB).
      const int calls = static_cast<int>(std::clamp<std::size_t>((std::size_t{64} << 20) / bytes, 1, 2000));
      bench::interleave(contenders, rounds, calls, [&] { MPI_Barrier(comm.native_handle()); });
      auto seconds = [&](std::size_t i) { return bench::median(contenders[i].seconds); };
      const double t_ring = seconds(0), t_messages = seconds(1), t_native = seconds(2), t_tree = seconds(3),
                   t_hier = seconds(4), t_hier_rings = seconds(5), t_mpi = seconds(6),
                   t_hier_node = seconds(7), t_other_pieces = versus_piece_kib > 0 ? seconds(8) : 0.0;
      worst_ring_vs_messages = std::min(worst_ring_vs_messages, t_messages / t_ring);
      if (bytes < (64 << 10)) worst_tree_below_64k = std::min(worst_tree_below_64k, t_ring / t_tree);
      const double ring_ratio = t_mpi / t_ring, native_ratio = t_mpi / t_native;  // > 1: faster than MPI
      if (bytes >= (1 << 20)) worst_ring_ge_1m = std::min(worst_ring_ge_1m, ring_ratio);
      if (bytes >= (16 << 20)) {
        worst_hier_ge_16m = std::min(worst_hier_ge_16m, t_ring / t_hier);
        worst_hier_vs_rings_ge_16m = std::min(worst_hier_vs_rings_ge_16m, t_hier_rings / t_hier);
        worst_hier_node_ge_16m = std::min(worst_hier_node_ge_16m, t_ring / t_hier_node);
        if (versus_piece_kib > 0) worst_pieces_vs_other_ge_16m = std::min(worst_pieces_vs_other_ge_16m, t_other_pieces / t_hier);
        // Every link of the ring carries the bus bandwidth, those between hosts included.
        worst_ring_link_ge_16m = std::min(worst_ring_link_ge_16m, bus_gbps(bytes, t_ring, ranks) * 8.0 / link_gbit);
      }
      if (bytes == (64 << 20)) {
        ring_vs_mpi_64m = ring_ratio;
        native_vs_mpi_64m = native_ratio;
      }
      if (ctx.rank() == 0)
        fmt::print("{:>10} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f} {:>9.2f} {:>9.2f} "
                   "{:>10.2f} {:>10.2f} {:>9.2f} {:>10.2f} {:>10.2f}\n",
                   bytes, bus_gbps(bytes, t_ring, ranks), bus_gbps(bytes, t_messages, ranks), bus_gbps(bytes, t_tree, ranks),
                   bus_gbps(bytes, t_hier, ranks), bus_gbps(bytes, t_hier_rings, ranks),
                   bus_gbps(bytes, t_hier_node, ranks), bus_gbps(bytes, t_native, ranks),
                   bus_gbps(bytes, t_mpi, ranks), ring_ratio, native_ratio, t_ring / t_tree, t_ring / t_hier,
                   t_messages / t_ring, t_hier_rings / t_hier, t_ring / t_hier_node);
      if (ctx.rank() == 0 && versus_piece_kib > 0)
        fmt::print("{:>10} hier in pieces of {} KiB {:.3f}, of {} KiB {:.3f}: {:.2f}x\n", "", piece_kib,
                   bus_gbps(bytes, t_hier, ranks), versus_piece_kib, bus_gbps(bytes, t_other_pieces, ranks),
                   t_other_pieces / t_hier);
    }
    const std::string link_share = link_gbit > 0.0 && worst_ring_link_ge_16m != 1e9
                                       ? fmt::format(" min_ring_link_share_ge_16MiB={:.3f}", worst_ring_link_ge_16m)
                                       : std::string();
    const std::string pieces = versus_piece_kib > 0 && worst_pieces_vs_other_ge_16m != 1e9
                                   ? fmt::format(" min_hier_pieces_vs_versus_ge_16MiB={:.3f}", worst_pieces_vs_other_ge_16m)
                                   : std::string();
    if (ctx.rank() == 0)
      fmt::print("summary: ranks={} ring_vs_mpi={:.3f} native_vs_mpi={:.3f} min_ring_vs_mpi_ge_1MiB={:.3f} "
                 "min_tree_vs_ring_below_64KiB={:.3f} min_hier_vs_ring_ge_16MiB={:.3f}{} min_ring_vs_messages={:.3f} "
                 "min_hier_reads_vs_rings_ge_16MiB={:.3f} min_hier_node_vs_ring_ge_16MiB={:.3f}{} (speed ratios, "
                 "ring/native vs MPI at 64 MiB; >1 is faster; "
                 "link share: bus bandwidth over --link-gbit; messages: the ring's chunks as MPI messages; "
                 "reads vs rings: Hierarchical's node ranks reading each other's memory vs passing messages; node: "
                 "Hierarchical over node memory, which the node's ranks see in place; pieces vs versus: Hierarchical in "
                 "pieces of --piece-kib vs --versus-piece-kib)\n",
                 ranks, ring_vs_mpi_64m, native_vs_mpi_64m, worst_ring_ge_1m == 1e9 ? 0.0 : worst_ring_ge_1m,
                 worst_tree_below_64k == 1e9 ? 0.0 : worst_tree_below_64k,
                 worst_hier_ge_16m == 1e9 ? 0.0 : worst_hier_ge_16m, link_share, worst_ring_vs_messages,
                 worst_hier_vs_rings_ge_16m == 1e9 ? 0.0 : worst_hier_vs_rings_ge_16m,
                 worst_hier_node_ge_16m == 1e9 ? 0.0 : worst_hier_node_ge_16m, pieces);
    return 0;
  });
}
