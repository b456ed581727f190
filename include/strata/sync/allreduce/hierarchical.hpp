#pragma once
// Hierarchical all-reduce for ranks spread over several nodes: a ring reduce-scatter among
// the L ranks of each node leaves each rank the node's sum of one share (1/L) of the
// buffer; a ring all-reduce between the ranks holding the same share on every node sums
// it across nodes; a ring all-gather within the node spreads the shares. Each rank sends
// only its 1/L share across nodes, and the L ranks of a node use the links in parallel.
//
// The cross-node ring computes every element's result on one rank and the rest is copies,
// so all ranks end bitwise identical. The buffer goes through these phases in pieces, the
// rings within and between nodes running at once on different pieces.
#include <algorithm>
#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "strata/comm/communicator.hpp"
#include "strata/error.hpp"
#include "strata/sync/allreduce/ring.hpp"
#include "strata/sync/span_list.hpp"

namespace strata::sync {

/// The two communicators of a hierarchical all-reduce.
template <Communicator C>
struct node_groups {
  C local;  ///< this node's ranks, in rank order
  C cross;  ///< the ranks with this local rank, one per node, in node order
};

namespace detail {

// The cross-node rings pair local rank l of every node, so every node needs l.
template <Communicator C>
void require_equal_nodes(C& comm, int node, int node_size) {
  const int mine[] = {node, node_size};
  std::vector<int> all(2 * static_cast<std::size_t>(comm.size()));  // (node, its size) of each rank
  comm.allgather(std::span<const int>(mine), std::span<int>(all));
  std::map<int, int> sizes;
  for (std::size_t i = 0; i < all.size(); i += 2) sizes[all[i]] = all[i + 1];
  if (std::ranges::all_of(sizes, [&](const auto& entry) { return entry.second == node_size; })) return;
  std::string listed;
  for (const auto& [id, size] : sizes) listed += fmt::format("{}node {} has {}", listed.empty() ? "" : ", ", id, size);
  throw comm_error(fmt::format("hierarchical all-reduce needs the same number of ranks on every node, but {}", listed));
}

}  // namespace detail

/// Collective over `comm`: its ranks grouped by node, where node = rank / ranks_per_node
/// (simulated nodes) when ranks_per_node > 0, else the machine (`node_color`). Throws
/// comm_error, naming the node sizes, unless every node has the same number of ranks.
template <Communicator C>
node_groups<C> split_by_node(C& comm, int ranks_per_node) {
  const int node = ranks_per_node > 0 ? comm.rank() / ranks_per_node : comm.node_color();
  C local = comm.split(node, comm.rank());
  detail::require_equal_nodes(comm, node, local.size());
  C cross = comm.split(local.rank(), comm.rank());
  return {std::move(local), std::move(cross)};
}

/// Reusable state of a hierarchical all-reduce: one ring workspace per communicator, since
/// a ring within the node and one between nodes run at once.
template <Communicator C, Element T>
struct hierarchical_workspace {
  ring_workspace<C, T> within, across;
};

namespace detail {

/// hierarchical_allreduce over `pieces` pieces of `data`, one ring within the node and one
/// between nodes running at once, advanced in turn without blocking by this thread.
template <Testable C, Element T>
std::size_t hierarchical_in_pieces(node_groups<C>& groups, const span_list<T>& data, T scale,
                                   hierarchical_workspace<C, T>& work, ring_pipeline within, ring_pipeline across,
                                   std::size_t pieces) {
  C& local = groups.local;
  auto piece_of = [&](std::size_t k) {
    const segment s = ring_segment(data.size(), static_cast<int>(pieces), static_cast<int>(k));
    return data.slice(s.begin, s.size);
  };
  const ring_codec<T> plain{}, scaled{scale, {}};
  const int l = local.size(), x = groups.cross.size();
  std::optional<ring_run<C, T, T>> in_node, between;
  // Rings within the node started (the pieces' reduce-scatters, then their all-gathers) and
  // rings between nodes started, and of each the ones finished.
  std::size_t started_within = 0, reduced = 0, started_across = 0, summed = 0, sent = 0;
  bool moved = false;  // in this pass, a ring started, finished or got on
  // Advances `run`; once it has finished, counts its bytes and ends it.
  auto finished = [&](std::optional<ring_run<C, T, T>>& run) {
    const std::size_t before = run->progress();
    const bool done = run->advance(false);
    moved = moved || done || run->progress() != before;
    if (done) {
      sent += run->sent();
      run.reset();
    }
    return done;
  };
  backoff idle(collective_pace(groups.cross));  // the ring between nodes is the one that waits on a network
  while (started_within < 2 * pieces || in_node || between) {
    moved = false;
    if (!in_node && started_within < 2 * pieces) {
      const bool gather = started_within >= pieces;
      const std::size_t k = gather ? started_within - pieces : started_within;
      if (!gather || k < summed) {  // a piece is spread once summed across nodes
        const int first = gather ? l - 1 : 0, last = gather ? 2 * (l - 1) : l - 1;
        in_node.emplace(local, piece_of(k), plain, work.within, within, first, last);
        ++started_within;
        moved = true;
      }
    }
    if (!between && started_across < reduced) {
      const span_list<T> piece = piece_of(started_across);
      const segment share = ring_owned_segment(piece.size(), l, local.rank());
      between.emplace(groups.cross, piece.slice(share.begin, share.size), scaled, work.across, across, 0, 2 * (x - 1));
      ++started_across;
      moved = true;
    }
    if (in_node && finished(in_node) && started_within <= pieces) ++reduced;  // a reduce-scatter finished
    if (between && finished(between)) ++summed;
    if (moved) idle.reset();
    else idle.pause();
  }
  return sent;
}

}  // namespace detail

/// Averages `data` over all ranks of the communicator `groups` was split from, in place:
/// the sum times `scale`. The rings within a node run as `within`, the ring between nodes
/// as `across`. Returns the bytes this rank sent.
///
/// The buffer is cut into pieces of about `piece_elements` (0: one piece), so that while
/// the ring between nodes sums one piece, the rings within the node reduce the next or
/// spread one already summed: the network and the node's memory work at once. On each
/// communicator the rings run one at a time and in the same order on every rank (the
/// reduce-scatters of all pieces, then their all-gathers), as their messages must. A
/// backend that cannot test a request without blocking runs the phases one after another.
template <Communicator C, Element T>
std::size_t hierarchical_allreduce(node_groups<C>& groups, const span_list<T>& data, T scale,
                                   hierarchical_workspace<C, T>& work, ring_pipeline within, ring_pipeline across,
                                   std::size_t piece_elements) {
  C& local = groups.local;
  constexpr std::size_t most_pieces = 1024;
  const std::size_t wanted = piece_elements == 0 ? 1 : (data.size() + piece_elements - 1) / piece_elements;
  const std::size_t pieces = std::clamp<std::size_t>(wanted, 1, most_pieces);
  if constexpr (Testable<C>)
    if (pieces > 1 && local.size() > 1 && groups.cross.size() > 1)
      return detail::hierarchical_in_pieces(groups, data, scale, work, within, across, pieces);
  std::size_t sent = ring_reduce_scatter(local, data, work.within, within);
  const segment share = ring_owned_segment(data.size(), local.size(), local.rank());
  sent += ring_allreduce(groups.cross, data.slice(share.begin, share.size), scale, work.across, across);
  return sent + ring_allgather(local, data, work.within, within);
}

}  // namespace strata::sync
