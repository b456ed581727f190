#pragma once
// The all-reduce algorithms, one specialization per AllReduce<Algorithm> policy. Each
// averages a fusion bucket (a list of gradient buffers) in place over all ranks.
#include <algorithm>
#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "strata/comm/communicator.hpp"
#include "strata/model/huge_pages.hpp"
#include "strata/policy/collective.hpp"
#include "strata/sync/allreduce/hierarchical.hpp"
#include "strata/sync/allreduce/ring.hpp"
#include "strata/sync/allreduce/tree.hpp"
#include "strata/sync/span_list.hpp"

namespace strata::sync {

struct allreduce_options {
  /// The ring's chunk and chunks in flight each way. A chunk is one message, and above the
  /// transport's eager limit every message pays a handshake: at 1-4 MiB, 256 KiB x 4 lost
  /// up to 11% to MPI_Allreduce on shared memory, where 1 MiB x 2 keeps up and, above
  /// 16 MiB, still keeps the data it reduces in cache.
  std::size_t ring_chunk_bytes = std::size_t{1} << 20;
  std::size_t ring_window = 2;
  /// Where a ring's ranks share the machine, buffers of up to shared_memory_max_bytes (0:
  /// none) go through shared memory, each chunk written into the neighbour's slots, rather
  /// than as messages: 2.2-8.4x faster from 4 KiB to 1 MiB on 2 ranks, where each message's
  /// handshake was the time. At 2-8 MiB messages won (0.88-1.00x), above they were even.
  /// Its chunks are smaller: with no handshake to amortize, the slots stay in cache. A ring
  /// between machines always sends messages.
  std::size_t shared_memory_max_bytes = std::size_t{1} << 20;
  std::size_t shared_memory_chunk_bytes = std::size_t{256} << 10;
  /// Hierarchical: nodes of this many consecutive ranks (simulated nodes); 0: the machines.
  int ranks_per_node = 0;
  /// Hierarchical: the chunk and window of the ring between nodes. Its messages cross the
  /// network, whose transport sends a message above its eager limit (OpenMPI's TCP: 64 KiB,
  /// header included) only once the receiver has answered; behind a loaded link that answer
  /// waits in the link's queue and the ring stalls. Chunks under the limit leave at once.
  std::size_t cross_node_chunk_bytes = std::size_t{60} << 10;
  std::size_t cross_node_window = 8;
  /// Hierarchical: a bucket is cut into pieces of about this size (under one element: one
  /// piece), so that the ring between nodes sums one piece while the rings within a node
  /// work on others. On 2 hosts x 2 ranks at 10 Gbit/s (docs/multi_host.md), 1.5 MiB moved
  /// a median 1.16x (1.09-1.41) the bus bandwidth of 4 MiB at 16-128 MiB, and more than 1 or
  /// 2 MiB did.
  std::size_t hierarchical_piece_bytes = std::size_t{3} << 19;
  /// Hierarchical: where the ranks of a node may read each other's memory (PeerReads), each
  /// sums its share of the node's gradients where they lie and copies the others' finished
  /// shares from them, rather than the node's rings passing them as messages. The node's
  /// sum is exact; a 16-bit wire type rounds only between nodes.
  bool read_within_node = true;
};

/// The ring within a machine (or on one node's ranks), its chunks carrying elements of W.
template <class W>
ring_pipeline ring_shape(const allreduce_options& o) {
  return {o.ring_chunk_bytes / sizeof(W), o.ring_window, o.shared_memory_max_bytes / sizeof(W),
          o.shared_memory_chunk_bytes / sizeof(W)};
}

/// Bytes a bandwidth-optimal all-reduce sends per rank: 2(p-1)/p of the buffer.
inline std::size_t optimal_allreduce_bytes(std::size_t bytes, int ranks) {
  return ranks <= 1 ? 0 : 2 * (static_cast<std::size_t>(ranks) - 1) * bytes / static_cast<std::size_t>(ranks);
}

/// Averages a list of buffers in place over all ranks: the sum times `scale`. Returns the
/// bytes this rank sent.
template <class Algorithm, Communicator C, Element T>
class allreduce;  // specialized below, one per algorithm

/// The communication library's own all-reduce, which needs one contiguous buffer: a single
/// buffer is reduced in place, several are copied into one buffer and back. Bytes are the algorithmic
/// estimate. It is the blocking call: it already runs on the communication thread, and
/// MPI's blocking all-reduce is much faster than its non-blocking one.
template <Communicator C, Element T>
class allreduce<Native, C, T> {
 public:
  explicit allreduce(const allreduce_options&) {}
  std::size_t operator()(C& comm, const span_list<T>& data, T scale) {
    std::span<T> buffer = contiguous(data);
    comm.allreduce_sum(buffer);
    if (data.parts().size() == 1) {
      if (scale != T{1})
        for (T& x : buffer) x *= scale;
    } else {
      data.for_each(0, data.size(), [&](std::size_t offset, std::span<T> s) {
        for (std::size_t k = 0; k < s.size(); ++k) {
          s[k] = contiguous_[offset + k];
          if (scale != T{1}) s[k] *= scale;
        }
      });
    }
    return optimal_allreduce_bytes(data.size() * sizeof(T), comm.size());
  }

 private:
  std::span<T> contiguous(const span_list<T>& data) {
    if (data.parts().size() == 1) return data.parts()[0];
    contiguous_.resize(data.size());
    data.for_each(0, data.size(), [&](std::size_t offset, std::span<T> s) { std::ranges::copy(s, contiguous_.begin() + offset); });
    return contiguous_;
  }

  host_vector<T> contiguous_;
};

/// strata's chunked, pipelined ring, in place on the buffers (no contiguous copy).
template <Communicator C, Element T>
class allreduce<Ring, C, T> {
 public:
  explicit allreduce(const allreduce_options& o) : shape_(ring_shape<T>(o)) {}
  std::size_t operator()(C& comm, const span_list<T>& data, T scale) { return ring_allreduce(comm, data, scale, work_, shape_); }
  /// Values of type V travelling as T, encoded and decoded by `codec` inside the ring.
  template <Element V>
  std::size_t operator()(C& comm, const span_list<V>& data, const ring_codec<V, T>& codec) {
    return ring_allreduce(comm, data, codec, work_, shape_);
  }

 private:
  ring_pipeline shape_;
  ring_workspace<C, T> work_;
};

/// Recursive doubling through one contiguous copy: the fewest latencies, for small buckets.
template <Communicator C, Element T>
class allreduce<Tree, C, T> {
 public:
  explicit allreduce(const allreduce_options&) {}
  std::size_t operator()(C& comm, const span_list<T>& data, T scale) {
    return tree_allreduce(comm, data, scale, work_);
  }

 private:
  tree_workspace<T> work_;
};

/// strata's ring within each node and across nodes, in place. The first call splits the
/// communicator into its node groups and keeps them, so an instance serves one communicator.
template <Communicator C, Element T>
class allreduce<Hierarchical, C, T> {
 public:
  explicit allreduce(const allreduce_options& o)
      : ranks_per_node_(o.ranks_per_node),
        within_(ring_shape<T>(o)),
        across_{o.cross_node_chunk_bytes / sizeof(T), o.cross_node_window, o.shared_memory_max_bytes / sizeof(T),
                o.shared_memory_chunk_bytes / sizeof(T)},
        piece_elements_(o.hierarchical_piece_bytes / sizeof(T)),
        read_within_node_(o.read_within_node) {}
  std::size_t operator()(C& comm, const span_list<T>& data, T scale) {
    return (*this)(comm, data, ring_codec<T>{scale, {}});
  }
  /// Values of type V travelling as T, encoded and decoded by `codec` inside the rings.
  template <Element V>
  std::size_t operator()(C& comm, const span_list<V>& data, const ring_codec<V, T>& codec) {
    if (!groups_) groups_ = split_by_node(comm, ranks_per_node_);
    return hierarchical_allreduce(*groups_, data, codec, work_, within_, across_, piece_elements_, read_within_node_);
  }

 private:
  int ranks_per_node_;
  ring_pipeline within_, across_;
  std::size_t piece_elements_;
  bool read_within_node_;
  std::optional<node_groups<C>> groups_;
  hierarchical_workspace<C, T> work_;
};

}  // namespace strata::sync
