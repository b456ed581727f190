#pragma once
// The all-reduce algorithms, one specialization per AllReduce<Algorithm> policy. Each sums
// a buffer in place over all ranks and reports the bytes this rank sent.
#include <cstddef>
#include <span>

#include "strata/comm/communicator.hpp"
#include "strata/policy/collective.hpp"
#include "strata/sync/allreduce/ring.hpp"

namespace strata::sync {

struct allreduce_options {
  std::size_t ring_chunk_bytes = std::size_t{1} << 20;
};

/// Bytes a bandwidth-optimal all-reduce sends per rank: 2(p-1)/p of the buffer.
inline std::size_t optimal_allreduce_bytes(std::size_t bytes, int ranks) {
  return ranks <= 1 ? 0 : 2 * (static_cast<std::size_t>(ranks) - 1) * bytes / static_cast<std::size_t>(ranks);
}

template <class Algorithm, Communicator C, Element T>
class allreduce;  // specialized below, one per algorithm

/// The communication library's own all-reduce; bytes are the algorithmic estimate.
template <Communicator C, Element T>
class allreduce<Native, C, T> {
 public:
  explicit allreduce(const allreduce_options&) {}
  std::size_t operator()(C& comm, std::span<T> data) {
    auto request = comm.iallreduce_sum(data);
    comm.wait(request);
    return optimal_allreduce_bytes(data.size_bytes(), comm.size());
  }
};

/// strata's chunked, pipelined ring.
template <Communicator C, Element T>
class allreduce<Ring, C, T> {
 public:
  explicit allreduce(const allreduce_options& o) : chunk_elements_(o.ring_chunk_bytes / sizeof(T)) {}
  std::size_t operator()(C& comm, std::span<T> data) { return ring_allreduce(comm, data, work_, chunk_elements_); }

 private:
  std::size_t chunk_elements_;
  ring_workspace<C, T> work_;
};

}  // namespace strata::sync
