#pragma once
// Ring all-reduce over point-to-point messages, chunked and pipelined, in place on a list
// of buffers.
//
// The (virtual) buffer is cut into one segment per rank. In step t of 2(p-1) rank r sends
// segment r-t to its right neighbour and receives segment r-t-1 from its left one: the
// first p-1 steps add what arrives (reduce-scatter: afterwards rank r holds the full sum of
// segment r+1, which it scales once), the rest store it (all-gather). What a rank sends in
// step t+1 is exactly what it received in step t, so the operation is one stream of
// chunks: each is forwarded as soon as it has arrived and been reduced, at most `window`
// chunks in flight, which keeps the data being reduced in cache. Every result is computed
// on exactly one rank and then copied, so all ranks end bitwise identical.
//
// The two halves also run alone (ring_reduce_scatter, ring_allgather): the hierarchical
// all-reduce puts a cross-node all-reduce between them.
#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "strata/comm/communicator.hpp"
#include "strata/sync/span_list.hpp"

namespace strata::sync {

/// Segment `i` of `n` elements split over `parts` as evenly as possible.
struct segment {
  std::size_t begin, size;
};
inline segment ring_segment(std::size_t n, int parts, int i) {
  const std::size_t p = static_cast<std::size_t>(parts), k = static_cast<std::size_t>(i);
  const std::size_t base = n / p, extra = n % p;
  return {k * base + std::min(k, extra), base + (k < extra ? 1 : 0)};
}

/// The segment whose full sum `rank` holds after ring_reduce_scatter over `ranks` ranks.
inline segment ring_owned_segment(std::size_t n, int ranks, int rank) {
  return ring_segment(n, ranks, (rank + 1) % ranks);
}

/// Multiplies every element by `scale`.
template <Element T>
void scale_in_place(const span_list<T>& data, T scale) {
  if (scale == T{1}) return;
  data.for_each(0, data.size(), [&](std::size_t, std::span<T> s) {
    for (T& x : s) x *= scale;
  });
}

/// Reusable state of one ring, so repeated calls allocate nothing once warm.
template <Communicator C, Element T>
struct ring_workspace {
  struct piece {
    int step;
    std::size_t chunk, begin, size;  // chunk index; absolute element range
  };
  struct request_range {
    std::size_t first = 0, count = 0;
  };
  std::vector<T> slots;                       // `window` chunk-sized receive buffers
  std::vector<piece> pieces;                  // every received chunk, in order
  std::vector<std::size_t> first_piece;       // index of each step's first piece
  std::vector<typename C::request> requests;  // all requests of one call
  std::vector<request_range> received, forwarded, first_sends;
};

namespace detail {

/// Steps [first, last) of the ring all-reduce on more than one rank; the result of a step
/// that completes a sum is scaled. A chunk that spans several buffers travels as one
/// message per buffer; the layout is the same on every rank. Returns the bytes sent.
template <Communicator C, Element T>
std::size_t ring_steps(C& comm, const span_list<T>& data, T scale, ring_workspace<C, T>& work,
                       std::size_t chunk_elements, std::size_t window, int first, int last) {
  const int p = comm.size(), r = comm.rank();
  const std::size_t n = data.size();
  if (n == 0 || first == last) return 0;
  constexpr int tag_base = 0x5254;  // + step: the chunks of one step arrive in order
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  const std::size_t chunk = std::max<std::size_t>(chunk_elements, 1), slots = std::max<std::size_t>(window, 1);
  auto segment_of = [&](int i) { return ring_segment(n, p, ((i % p) + p) % p); };

  using piece = typename ring_workspace<C, T>::piece;
  using range = typename ring_workspace<C, T>::request_range;
  work.pieces.clear();
  work.first_piece.clear();
  for (int step = first; step < last; ++step) {
    work.first_piece.push_back(work.pieces.size());
    const segment s = segment_of(r - step - 1);
    for (std::size_t c = 0; c * chunk < s.size; ++c)
      work.pieces.push_back(piece{step, c, s.begin + c * chunk, std::min(chunk, s.size - c * chunk)});
  }
  const std::size_t pieces = work.pieces.size();
  work.slots.resize(slots * chunk);
  work.requests.clear();
  work.received.assign(pieces, {});
  work.forwarded.assign(pieces, {});
  work.first_sends.clear();

  std::size_t sent = 0;
  auto send = [&](std::size_t begin, std::size_t size, int step) {
    range out{work.requests.size(), 0};
    data.for_each(begin, size, [&](std::size_t, std::span<T> s) {
      work.requests.push_back(comm.isend(std::span<const T>(s), right, tag_base + step));
      sent += s.size_bytes();
      ++out.count;
    });
    return out;
  };
  auto wait = [&](range rg) {
    for (std::size_t k = rg.first; k < rg.first + rg.count; ++k) comm.wait(work.requests[k]);
  };
  // The first step sends from this rank's buffer; each later one forwards what arrived in
  // the step before.
  auto sends_of = [&](int step, std::size_t c) {
    if (step == first) return work.first_sends[c];
    return work.forwarded[work.first_piece[static_cast<std::size_t>(step - 1 - first)] + c];
  };
  auto post_receive = [&](std::size_t i) {
    const piece& pc = work.pieces[i];
    range in{work.requests.size(), 0};
    if (pc.step < p - 1) {  // reduce-scatter: into a slot, to be added
      T* slot = work.slots.data() + (i % slots) * chunk;
      data.for_each(pc.begin, pc.size, [&](std::size_t offset, std::span<T> s) {
        work.requests.push_back(comm.irecv(std::span<T>(slot + offset, s.size()), left, tag_base + pc.step));
        ++in.count;
      });
    } else {  // all-gather: straight into place, once this rank's send of that memory has left
      // (a send of an earlier call has left: that call waited for all of its requests)
      if (pc.step + 1 - p >= first) wait(sends_of(pc.step + 1 - p, pc.chunk));
      data.for_each(pc.begin, pc.size, [&](std::size_t, std::span<T> s) {
        work.requests.push_back(comm.irecv(s, left, tag_base + pc.step));
        ++in.count;
      });
    }
    work.received[i] = in;
  };

  const segment own = segment_of(r - first);
  for (std::size_t c = 0; c * chunk < own.size; ++c)
    work.first_sends.push_back(send(own.begin + c * chunk, std::min(chunk, own.size - c * chunk), first));
  for (std::size_t i = 0; i < std::min(slots, pieces); ++i) post_receive(i);
  for (std::size_t i = 0; i < pieces; ++i) {
    const piece pc = work.pieces[i];
    wait(work.received[i]);
    if (pc.step < p - 1) {
      const T* in = work.slots.data() + (i % slots) * chunk;
      const bool complete = pc.step == p - 2;  // this rank finishes the sum: scale it once
      data.for_each(pc.begin, pc.size, [&](std::size_t offset, std::span<T> s) {
        for (std::size_t k = 0; k < s.size(); ++k) s[k] += in[offset + k];
        if (complete && scale != T{1})
          for (T& x : s) x *= scale;
      });
    }
    if (pc.step + 1 < last) work.forwarded[i] = send(pc.begin, pc.size, pc.step + 1);
    if (i + slots < pieces) post_receive(i + slots);
  }
  for (auto& request : work.requests) comm.wait(request);  // waiting a finished request is a no-op
  return sent;
}

}  // namespace detail

/// Averages `data` over all ranks in place: the sum times `scale` (1 for a plain sum).
/// Returns the bytes this rank sent.
template <Communicator C, Element T>
std::size_t ring_allreduce(C& comm, const span_list<T>& data, T scale, ring_workspace<C, T>& work,
                           std::size_t chunk_elements, std::size_t window) {
  const int p = comm.size();
  if (p == 1) {
    scale_in_place(data, scale);
    return 0;
  }
  return detail::ring_steps(comm, data, scale, work, chunk_elements, window, 0, 2 * (p - 1));
}

/// Sums `data` over all ranks, leaving each rank the sum of its ring_owned_segment only.
template <Communicator C, Element T>
std::size_t ring_reduce_scatter(C& comm, const span_list<T>& data, ring_workspace<C, T>& work,
                                std::size_t chunk_elements, std::size_t window) {
  return detail::ring_steps(comm, data, T{1}, work, chunk_elements, window, 0, comm.size() - 1);
}

/// Copies each rank's ring_owned_segment of `data` to every rank.
template <Communicator C, Element T>
std::size_t ring_allgather(C& comm, const span_list<T>& data, ring_workspace<C, T>& work, std::size_t chunk_elements,
                           std::size_t window) {
  const int p = comm.size();
  return detail::ring_steps(comm, data, T{1}, work, chunk_elements, window, p - 1, 2 * (p - 1));
}

}  // namespace strata::sync
