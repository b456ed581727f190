#pragma once
// Recursive-doubling all-reduce: log2(p) exchanges of the whole buffer, the fewest message
// latencies of any all-reduce, so it suits small buffers (the ring needs 2(p-1) steps).
//
// On 2^k ranks, in round j each rank swaps its partial sum with rank ^ 2^j and both add the
// two in the same order (the lower rank's values first), so partners stay bitwise equal.
// On p = 2^k + e ranks, ranks 2^k + i first fold their data into rank i, wait out the
// doubling, and receive rank i's result.
//
// The buffers are staged into one contiguous copy: for small buffers a message per part
// would cost more latency than the copy costs time.
#include <algorithm>
#include <bit>
#include <cstddef>
#include <span>
#include <vector>

#include "strata/comm/communicator.hpp"
#include "strata/numeric/lanes.hpp"
#include "strata/sync/span_list.hpp"

namespace strata::sync {

/// Reusable buffers of one tree all-reduce.
template <Element T>
struct tree_workspace {
  std::vector<T> sum, incoming;
};

namespace detail {

// The lower rank's values first, so both partners compute the same sums bit for bit.
template <Element T>
void add_lower_rank_first(std::span<T> mine, std::span<const T> theirs, bool mine_is_lower) {
  const T* lower = mine_is_lower ? mine.data() : theirs.data();
  const T* higher = mine_is_lower ? theirs.data() : mine.data();
  lanes::add(lower, higher, mine.data(), mine.size());
}

}  // namespace detail

/// Averages `data` over all ranks in place: the sum times `scale`, bitwise identical on
/// every rank. Returns the bytes this rank sent.
template <Communicator C, Element T>
std::size_t tree_allreduce(C& comm, const span_list<T>& data, T scale, tree_workspace<T>& work) {
  constexpr int tag = 0x5452;  // one message per ordered pair of ranks and call
  const int p = comm.size(), r = comm.rank();
  const int doubling = static_cast<int>(std::bit_floor(static_cast<unsigned>(p)));  // ranks in the doubling
  const std::size_t n = data.size();
  std::vector<T>& sum = work.sum;
  sum.resize(n);
  work.incoming.resize(n);
  data.for_each(0, n, [&](std::size_t offset, std::span<T> s) { std::ranges::copy(s, sum.begin() + offset); });

  std::size_t sent = 0;
  auto send = [&](int peer) {
    sent += n * sizeof(T);
    return comm.isend(std::span<const T>(sum), peer, tag);
  };
  auto receive = [&](int peer, std::span<T> into) {
    auto request = comm.irecv(into, peer, tag);
    comm.wait(request);
  };
  auto add_incoming = [&](int peer) {
    detail::add_lower_rank_first(std::span<T>(sum), std::span<const T>(work.incoming), r < peer);
  };

  if (r >= doubling) {  // folded: hand the data over, then receive the result
    auto out = send(r - doubling);
    comm.wait(out);
    receive(r - doubling, sum);
  } else {
    if (r + doubling < p) {
      receive(r + doubling, work.incoming);
      add_incoming(r + doubling);
    }
    for (int distance = 1; distance < doubling; distance *= 2) {
      auto out = send(r ^ distance);
      receive(r ^ distance, work.incoming);
      comm.wait(out);  // the send reads the sum that the addition overwrites
      add_incoming(r ^ distance);
    }
    if (scale != T{1})
      for (T& x : sum) x *= scale;
    if (r + doubling < p) {
      auto out = send(r + doubling);
      comm.wait(out);
    }
  }
  data.for_each(0, n, [&](std::size_t offset, std::span<T> s) {
    std::ranges::copy_n(sum.begin() + offset, s.size(), s.begin());
  });
  return sent;
}

}  // namespace strata::sync
