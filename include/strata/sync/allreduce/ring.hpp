#pragma once
// Ring all-reduce over point-to-point messages: a reduce-scatter, after which rank r holds
// the full sum of one segment, then an all-gather of the summed segments. Each segment
// travels in chunks, and a chunk is reduced while the next is still in flight. Every sum is
// computed on exactly one rank and then copied, so all ranks end bitwise identical.
#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "strata/comm/communicator.hpp"

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

namespace detail {

inline constexpr int ring_tag = 0x5254;  // "RT"

/// Sends `out` to `right` and receives `in` from `left`, chunk by chunk; calls
/// `received(begin, size)` for each chunk of `in` as soon as it has arrived.
template <Communicator C, Element T, class OnChunk>
void exchange_chunks(C& comm, std::span<const T> out, std::span<T> in, int right, int left, std::size_t chunk,
                     std::vector<typename C::request>& requests, OnChunk received) {
  requests.clear();
  const std::size_t in_chunks = (in.size() + chunk - 1) / chunk;
  for (std::size_t c = 0; c < in_chunks; ++c) {
    const std::size_t begin = c * chunk;
    requests.push_back(comm.irecv(in.subspan(begin, std::min(chunk, in.size() - begin)), left, ring_tag));
  }
  for (std::size_t begin = 0; begin < out.size(); begin += chunk)
    requests.push_back(comm.isend(out.subspan(begin, std::min(chunk, out.size() - begin)), right, ring_tag));
  for (std::size_t c = 0; c < in_chunks; ++c) {
    comm.wait(requests[c]);
    const std::size_t begin = c * chunk;
    received(begin, std::min(chunk, in.size() - begin));
  }
  for (std::size_t i = in_chunks; i < requests.size(); ++i) comm.wait(requests[i]);
}

}  // namespace detail

/// Reusable buffers of one ring, so repeated calls allocate nothing.
template <Communicator C, Element T>
struct ring_workspace {
  std::vector<T> incoming;
  std::vector<typename C::request> requests;
};

/// Sums `data` over all ranks in place; returns the bytes this rank sent.
template <Communicator C, Element T>
std::size_t ring_allreduce(C& comm, std::span<T> data, ring_workspace<C, T>& work, std::size_t chunk_elements) {
  const int p = comm.size(), r = comm.rank();
  if (p == 1 || data.empty()) return 0;
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  const std::size_t chunk = std::max<std::size_t>(chunk_elements, 1);
  auto seg = [&](int i) {
    const segment s = ring_segment(data.size(), p, (i % p + p) % p);
    return data.subspan(s.begin, s.size);
  };
  work.incoming.resize(ring_segment(data.size(), p, 0).size);  // segment 0 is the largest
  std::size_t sent = 0;

  for (int step = 0; step < p - 1; ++step) {  // reduce-scatter
    std::span<T> out = seg(r - step), target = seg(r - step - 1);
    std::span<T> in(work.incoming.data(), target.size());
    detail::exchange_chunks<C, T>(comm, out, in, right, left, chunk, work.requests, [&](std::size_t b, std::size_t n) {
      for (std::size_t i = b; i < b + n; ++i) target[i] += in[i];
    });
    sent += out.size_bytes();
  }
  for (int step = 0; step < p - 1; ++step) {  // all-gather
    std::span<T> out = seg(r + 1 - step), in = seg(r - step);
    detail::exchange_chunks<C, T>(comm, out, in, right, left, chunk, work.requests, [](std::size_t, std::size_t) {});
    sent += out.size_bytes();
  }
  return sent;
}

}  // namespace strata::sync
