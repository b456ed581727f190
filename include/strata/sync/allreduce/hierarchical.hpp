#pragma once
// Hierarchical all-reduce for ranks spread over several nodes: a ring reduce-scatter among
// the L ranks of each node leaves each rank the node's sum of one share (1/L) of the
// buffer; a ring all-reduce between the ranks holding the same share on every node sums
// it across nodes; a ring all-gather within the node spreads the shares. Each rank sends
// only its 1/L share across nodes, and the L ranks of a node use the links in parallel.
//
// The cross-node ring computes every element's result on one rank and the rest is copies,
// so all ranks end bitwise identical.
#include <algorithm>
#include <cstddef>
#include <map>
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

/// Averages `data` over all ranks of the communicator `groups` was split from, in place:
/// the sum times `scale`. The rings within a node run as `within`, the ring between nodes
/// as `across`. Returns the bytes this rank sent.
template <Communicator C, Element T>
std::size_t hierarchical_allreduce(node_groups<C>& groups, const span_list<T>& data, T scale,
                                   ring_workspace<C, T>& work, ring_pipeline within, ring_pipeline across) {
  C& local = groups.local;
  std::size_t sent = ring_reduce_scatter(local, data, work, within.chunk_elements, within.window);
  const segment share = ring_owned_segment(data.size(), local.size(), local.rank());
  sent += ring_allreduce(groups.cross, data.slice(share.begin, share.size), scale, work, across.chunk_elements,
                         across.window);
  return sent + ring_allgather(local, data, work, within.chunk_elements, within.window);
}

}  // namespace strata::sync
