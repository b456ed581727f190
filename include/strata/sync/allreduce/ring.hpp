#pragma once
// Ring all-reduce over point-to-point messages, chunked and pipelined, in place on a list
// of buffers.
//
// The (virtual) buffer is cut into one segment per rank. In step t of 2(p-1) rank r sends
// segment r-t to its right neighbour and receives segment r-t-1 from its left one: the
// first p-1 steps add what arrives (reduce-scatter: afterwards rank r holds the full sum of
// segment r+1), the rest store it (all-gather). What a rank sends in
// step t+1 is exactly what it received in step t, so the operation is one stream of
// chunks: each is forwarded as soon as it has arrived and been reduced, at most `window`
// chunks in flight, which keeps the data being reduced in cache. Every result is computed
// on exactly one rank and then copied, so all ranks end bitwise identical.
//
// A ring may run only some of its steps: the hierarchical all-reduce puts a cross-node
// all-reduce between a reduce-scatter and an all-gather within the node (also callable
// alone: ring_reduce_scatter, ring_allgather). A ring is a run (detail::ring_run) that can
// also be advanced without blocking, so that one thread drives two at once.
//
// Chunks travel as messages, or, where every rank shares the machine and the backend maps
// shared memory (SharedMemory), each rank writes them straight into landing slots of its
// right neighbour's (shared_landing): one copy, no kernel call, no handshake per chunk.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstddef>
#include <cstring>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "strata/comm/communicator.hpp"
#include "strata/error.hpp"
#include "strata/model/huge_pages.hpp"
#include "strata/numeric/lanes.hpp"
#include "strata/sync/span_list.hpp"

namespace strata::sync {

/// How a ring cuts its stream: elements per chunk, chunks in flight each way; and up to
/// which buffer size (elements; 0: never) chunks go through shared memory where the ranks
/// share a machine (else: as messages), cut to their own size there (0: chunk_elements).
struct ring_pipeline {
  std::size_t chunk_elements, window;
  std::size_t shared_memory_up_to = SIZE_MAX;
  std::size_t shared_chunk_elements = 0;
};

/// A rank's landing area for the chunks its left neighbour writes, in shared memory: two
/// counters, each on a cache line of its own, then `window` slots. The counters count every
/// chunk ever sent over this pair of ranks of the communicator, so that a ring run starts
/// where the last one ended, without a handshake; chunk m lands in slot m % window.
struct shared_landing {
  static constexpr std::size_t line = 64, slots_at = 2 * line;
  std::byte* base = nullptr;

  /// Chunks written into the slots so far: stored by the left neighbour only.
  std::atomic_ref<std::uint64_t> arrived() const { return counter(0); }
  /// Chunks the owner has finished with (their slots are free): stored by the owner only.
  std::atomic_ref<std::uint64_t> freed() const { return counter(line); }
  template <class W>
  W* slot(std::uint64_t chunk, std::size_t slot_elements, std::size_t window) const {
    return reinterpret_cast<W*>(base + slots_at) + (chunk % window) * slot_elements;
  }
  static std::size_t bytes(std::size_t slot_bytes, std::size_t window) { return slots_at + window * slot_bytes; }

 private:
  std::atomic_ref<std::uint64_t> counter(std::size_t at) const {
    return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(base + at));
  }
};

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

/// How values of type T travel as wire type W, and where `scale` applies. In place (W = T)
/// the ring sums exactly what the ranks hold and the rank completing a sum scales it once.
/// Through a narrower wire type a rank's own value is scaled (and gets its error-feedback
/// residual added) as it enters the sum, so no partial sum can overflow the wire type, and
/// a value is rounded to W only when it is sent, the rounding error kept in the residual.
/// In place, the sums are lanes::add's; through a wire type each pass works on a register of
/// values at a time (numeric/lanes.hpp).
template <Element T, Element W = T>
struct ring_codec {
  static constexpr bool in_place = std::is_same_v<T, W>;
  T scale = T{1};
  std::span<float> residual;  ///< one per element of the buffer, or empty
  /// Set when a finished value is NaN or infinite: every finished value passes through
  /// this rank, so every rank learns the same.
  mutable bool nonfinite = false;

  /// This rank's own values `d` (elements from `at` on) enter the sum and are sent as `w`.
  void enter(std::span<T> d, std::span<W> w, std::size_t at) const {
    if constexpr (!in_place) encode(d, w, nullptr, at, false);
  }

  /// A partial sum `in` arrived for this rank's values `d`: add them, and encode the result
  /// for sending as `w`. A complete sum is scaled (in place) or rounded for everyone.
  void add(std::span<T> d, std::span<W> w, const W* in, std::size_t at, bool complete) const {
    if constexpr (in_place) {
      lanes::add(d.data(), in, d.data(), d.size(), complete ? scale : T{1});
    } else {
      encode(d, w, in, at, complete);
    }
  }

  /// A finished value arrived as `w`: store it in `d`.
  void store(std::span<T> d, std::span<const W> w) const {
    if constexpr (!in_place) {
      const bool flagged = lanes::for_each_step(d.size(), [&](std::size_t k, auto m) {
        const lanes::floats value = lanes::widen<W>(lanes::load(w.data() + k, m));
        lanes::store(value, d.data() + k, m);
        return lanes::nonfinite(value);
      });
      nonfinite = nonfinite || flagged;
    }
  }

 private:
  /// w = W(d * scale (+ residual) (+ in)), a register of values at a time, in one pass over memory.
  /// `keep_rounded`: d takes the rounded value everyone will hold; otherwise d is left
  /// alone (the all-gather overwrites it).
  void encode(std::span<T> d, std::span<W> w, const W* in, std::size_t at, bool keep_rounded) const {
    static_assert(std::is_same_v<T, float> && lanes::is_float16<W>, "a 16-bit wire type carries float values");
    float* const kept = residual.empty() ? nullptr : residual.data() + at;
    const float by = scale;  // a local: the stores into d could otherwise change the member
    const bool flagged = lanes::for_each_step(d.size(), [&, by](std::size_t k, auto m) {
      // (The compiler may fuse the scaling and the first sum into one multiply-add, which
      // rounds once: as exact or more, and the same on every rank of a job.)
      lanes::floats sum = lanes::load(d.data() + k, m) * by;
      if (kept) sum += lanes::load(kept + k, m);
      if (in) sum += lanes::widen<W>(lanes::load(in + k, m));
      const lanes::bits16 sent = lanes::narrow<W>(sum);
      lanes::store(sent, w.data() + k, m);
      if (!kept && !keep_rounded) return lanes::mask{};
      const lanes::floats rounded = lanes::widen<W>(sent);
      if (kept) lanes::store(sum - rounded, kept + k, m);
      if (!keep_rounded) return lanes::mask{};
      lanes::store(rounded, d.data() + k, m);
      return lanes::nonfinite(rounded);
    });
    nonfinite = nonfinite || flagged;
  }
};

/// Reusable state of one ring, so repeated calls allocate nothing once warm.
template <Communicator C, Element W>
struct ring_workspace {
  struct piece {
    int step;
    std::size_t chunk, begin, size;  // chunk index; absolute element range
  };
  struct request_range {
    std::size_t first = 0, count = 0;
  };
  host_vector<W> slots;                       // `window` chunk-sized receive buffers
  host_vector<W> wire;                        // the buffer as it travels, when W is not the data type
                                              // (and the caller gives none)
  std::vector<piece> pieces;                  // every received chunk, in order
  std::vector<std::size_t> first_piece;       // index of each step's first piece
  std::vector<typename C::request> requests;  // all requests of one run
  std::vector<request_range> received, forwarded, first_sends;
  host_vector<W> staged;                      // a fragmented buffer list, gathered into one (see ring_run)
};

/// Whether a buffer list is so finely cut (a tensor partitioned along an inner axis is one
/// block per outer index) that a message per block would cost more than copying it once:
/// the ring then travels over one contiguous copy.
template <class T>
bool fragmented(const span_list<T>& data) {
  constexpr std::size_t parts_worth_a_message = 16, elements_worth_a_message = 1024;
  return data.parts().size() > parts_worth_a_message && data.size() / data.parts().size() < elements_worth_a_message;
}

namespace detail {

/// Steps [first, last) of the ring all-reduce on more than one rank, as a run that can be
/// advanced without blocking: one thread then drives rings on two communicators at once
/// (the hierarchical all-reduce). A chunk that spans several buffers travels as one message
/// per buffer; the layout is the same on every rank. A fragmented list travels as one
/// contiguous copy instead, written back at the end. Through a wire type the buffer travels
/// as `wire` (one element per element of `data`, else usage_error; empty: the workspace's).
/// `codec`, `work` and `wire` must outlive the run.
template <Communicator C, Element T, Element W>
class ring_run {
 public:
  ring_run(C& comm, const span_list<T>& data, const ring_codec<T, W>& codec, ring_workspace<C, W>& work,
           ring_pipeline shape, int first, int last, std::span<W> wire = {})
      : comm_(comm), codec_(codec), work_(work), data_(data), first_(first), last_(last), p_(comm.size()),
        r_(comm.rank()) {
    if (data_.size() == 0 || first == last) {
      done_ = true;
      return;
    }
    if constexpr (in_place) {
      // (Other wire types travel in one contiguous wire buffer already.)
      if (fragmented(data_)) {
        work_.staged.resize(data_.size());
        data_.for_each(0, data_.size(),
                       [&](std::size_t at, std::span<T> d) { std::ranges::copy(d, work_.staged.begin() + at); });
        original_ = std::exchange(data_, span_list<T>({std::span<T>(work_.staged)}));
        staged_ = true;
      }
    }
    const std::size_t n = data_.size();
    chunk_ = std::max<std::size_t>(shape.chunk_elements, 1);
    slots_ = std::max<std::size_t>(shape.window, 1);
    if constexpr (SharedMemory<C>)
      if (data_.size() <= shape.shared_memory_up_to)
        land_in_shared_memory(shape.shared_chunk_elements > 0 ? shape.shared_chunk_elements : chunk_);
    if constexpr (!in_place) {
      if (wire.empty()) {  // the workspace's, kept from run to run
        work_.wire.resize(n);
        wire = work_.wire;
      }
      if (wire.size() != n)
        throw usage_error(fmt::format("internal: a ring over {} elements was given a wire of {}", n, wire.size()));
      wire_ = wire;
    }
    work_.pieces.clear();
    work_.first_piece.clear();
    for (int step = first; step < last; ++step) {
      work_.first_piece.push_back(work_.pieces.size());
      const segment s = segment_of(r_ - step - 1);
      for (std::size_t c = 0; c * chunk_ < s.size; ++c)
        work_.pieces.push_back(piece{step, c, s.begin + c * chunk_, std::min(chunk_, s.size - c * chunk_)});
    }
    pieces_ = work_.pieces.size();
    work_.requests.clear();
    work_.first_sends.clear();
    if (!shared()) {
      work_.slots.resize(slots_ * chunk_);
      work_.received.assign(pieces_, {});
      work_.forwarded.assign(pieces_, {});
    }
    // This rank's own segment enters the sum (when the reduce-scatter is run) and leaves.
    own_ = segment_of(r_ - first);
    for (std::size_t c = 0; c * chunk_ < own_.size; ++c) {
      const std::size_t begin = own_.begin + c * chunk_, size = std::min(chunk_, own_.size - c * chunk_);
      if (first == 0)
        for_each_pair(begin, size, [&](std::span<T> d, std::span<W> w, std::size_t at) { codec_.enter(d, w, at); });
      ++own_chunks_;
      if (!shared()) work_.first_sends.push_back(send(begin, size, first));
    }
    // Chunks this rank sends: its own, then each piece it forwards (all but the last step's).
    chunks_out_ = own_chunks_ + static_cast<std::size_t>(std::ranges::count_if(
                                    work_.pieces, [&](const piece& pc) { return pc.step + 1 < last_; }));
    if (!shared()) post_receives(false);
  }
  ring_run(const ring_run&) = delete;
  ring_run& operator=(const ring_run&) = delete;

  /// Handles every chunk that has arrived, in order, forwarding each; with `block`, waits
  /// for the rest. Returns true once every message of the run has completed.
  bool advance(bool block) {
    if (done_) return true;
    if (shared()) {
      if (!advance_shared(block)) return false;
    } else {
      while (next_ < pieces_) {
        if (!post_receives(block) || !complete(work_.received[next_], block)) return false;
        handle(next_++);
      }
      for (; drained_ < work_.requests.size(); ++drained_)  // a finished request: at once
        if (!complete(range{drained_, 1}, block)) return false;
    }
    if constexpr (in_place)
      if (staged_)
        original_.for_each(0, original_.size(), [&](std::size_t at, std::span<T> d) {
          std::copy_n(work_.staged.begin() + static_cast<std::ptrdiff_t>(at), d.size(), d.begin());
        });
    done_ = true;
    return true;
  }

  /// Grows whenever the run posts a receive, handles a chunk, sees a message complete or
  /// writes a chunk into shared memory.
  std::size_t progress() const { return next_ + posted_ + drained_ + written_; }
  std::size_t sent() const { return sent_; }

 private:
  using piece = typename ring_workspace<C, W>::piece;
  using range = typename ring_workspace<C, W>::request_range;
  static constexpr bool in_place = std::is_same_v<T, W>;
  static constexpr int tag_base = 0x5254;  // + step: the chunks of one step arrive in order

  segment segment_of(int i) const { return ring_segment(data_.size(), p_, ((i % p_) + p_) % p_); }

  /// Applies f(offset, piece) to the pieces of what travels over [begin, begin + size), as
  /// span_list::for_each does: the data's own parts, or its image in the one wire buffer.
  template <class F>
  void for_each_wire(std::size_t begin, std::size_t size, F&& f) const {
    if constexpr (in_place) data_.for_each(begin, size, std::forward<F>(f));
    else if (size > 0) f(std::size_t{0}, wire_.subspan(begin, size));
  }

  /// Applies f(data piece, matching wire piece, absolute index of the piece's first element).
  template <class F>
  void for_each_pair(std::size_t begin, std::size_t size, F&& f) const {
    data_.for_each(begin, size, [&](std::size_t offset, std::span<T> d) {
      if constexpr (in_place) f(d, d, begin + offset);
      else f(d, wire_.subspan(begin + offset, d.size()), begin + offset);
    });
  }

  range send(std::size_t begin, std::size_t size, int step) {
    range out{work_.requests.size(), 0};
    for_each_wire(begin, size, [&](std::size_t, std::span<W> s) {
      work_.requests.push_back(comm_.isend(std::span<const W>(s), right(), tag_base + step));
      sent_ += s.size_bytes();
      ++out.count;
    });
    return out;
  }

  /// Whether the requests of `rg` have completed; with `block` (or a backend that cannot
  /// test), waits until they have.
  bool complete(range rg, bool block) {
    for (std::size_t k = rg.first; k < rg.first + rg.count; ++k) {
      if constexpr (Testable<C>)
        if (!block) {
          if (!comm_.test(work_.requests[k])) return false;
          continue;
        }
      wait_paced(comm_, work_.requests[k], collective_pace(comm_));
    }
    return true;
  }

  /// The first step sends from this rank's buffer; each later one forwards what arrived in
  /// the step before.
  range sends_of(int step, std::size_t c) const {
    if (step == first_) return work_.first_sends[c];
    return work_.forwarded[work_.first_piece[static_cast<std::size_t>(step - 1 - first_)] + c];
  }

  /// Posts the receives of the chunks up to `window` ahead of the next one to handle.
  /// Returns false where one cannot be posted yet (without `block`).
  bool post_receives(bool block) {
    for (; posted_ < pieces_ && posted_ < next_ + slots_; ++posted_) {
      const piece& pc = work_.pieces[posted_];
      range in{work_.requests.size(), 0};
      if (pc.step < p_ - 1) {  // reduce-scatter: into a slot, to be added
        W* slot = work_.slots.data() + (posted_ % slots_) * chunk_;
        for_each_wire(pc.begin, pc.size, [&](std::size_t offset, std::span<W> s) {
          work_.requests.push_back(comm_.irecv(std::span<W>(slot + offset, s.size()), left(), tag_base + pc.step));
          ++in.count;
        });
      } else {  // all-gather: straight into place, once this rank's send of that memory has left
        // (a send of an earlier run has left: that run completed all of its requests)
        if (pc.step + 1 - p_ >= first_ && !complete(sends_of(pc.step + 1 - p_, pc.chunk), block)) return false;
        for_each_wire(pc.begin, pc.size, [&](std::size_t, std::span<W> s) {
          work_.requests.push_back(comm_.irecv(s, left(), tag_base + pc.step));
          ++in.count;
        });
      }
      work_.received[posted_] = in;
    }
    return true;
  }

  /// Chunk `i` has arrived: add this rank's values to the partial sum, or store the
  /// finished values; then forward it (through shared memory, write() does, in order).
  void handle(std::size_t i) {
    const piece pc = work_.pieces[i];
    const W* in = landed(i);
    if (pc.step < p_ - 1) {
      const bool complete_sum = pc.step == p_ - 2;
      for_each_pair(pc.begin, pc.size, [&](std::span<T> d, std::span<W> w, std::size_t at) {
        codec_.add(d, w, in + (at - pc.begin), at, complete_sum);
      });
    } else {
      if (shared())  // (a message landed in place already)
        for_each_wire(pc.begin, pc.size,
                        [&](std::size_t offset, std::span<W> s) { std::memcpy(s.data(), in + offset, s.size_bytes()); });
      for_each_pair(pc.begin, pc.size, [&](std::span<T> d, std::span<W> w, std::size_t) { codec_.store(d, w); });
    }
    if (!shared() && pc.step + 1 < last_) work_.forwarded[i] = send(pc.begin, pc.size, pc.step + 1);
  }

  /// Chunks of `chunk` elements land in shared memory where every rank of the ring can map
  /// it; each slot holds the largest chunk this run sends, so that a small buffer takes
  /// little shared memory.
  void land_in_shared_memory(std::size_t chunk) {
    const std::size_t largest_segment = (data_.size() + static_cast<std::size_t>(p_) - 1) / static_cast<std::size_t>(p_);
    const std::size_t slot_elements = std::min(chunk, largest_segment);
    const std::span<std::byte* const> segments =
        comm_.shared_segments(shared_landing::bytes(slot_elements * sizeof(W), slots_));
    if (segments.empty()) return;
    chunk_ = slot_elements;  // a slot holds one chunk
    mine_.base = segments[static_cast<std::size_t>(r_)];
    right_.base = segments[static_cast<std::size_t>(right())];
    received_before_ = mine_.freed().load(std::memory_order_acquire);
    sent_before_ = right_.arrived().load(std::memory_order_acquire);
  }

  /// Where chunk `i` of this run has landed: a slot of this rank's, in shared memory or not.
  const W* landed(std::size_t i) const {
    if (shared()) return mine_.slot<W>(received_before_ + i, chunk_, slots_);
    return work_.slots.data() + (i % slots_) * chunk_;
  }

  /// The shared-memory ring: handles each chunk that has landed, and writes each chunk that
  /// is ready (its own, or a piece handled) into the right neighbour's next free slot, in
  /// order; with `block`, until the run is done.
  bool advance_shared(bool block) {
    for (backoff idle(collective_pace(comm_));;) {
      bool moved = false;
      while (writable()) {
        write(written_++);
        moved = true;
      }
      if (next_ < pieces_ && mine_.arrived().load(std::memory_order_acquire) > received_before_ + next_) {
        handle(next_++);
        mine_.freed().store(received_before_ + next_, std::memory_order_release);
        moved = true;
      }
      if (next_ == pieces_ && written_ == chunks_out_) return true;
      if (moved) {
        idle.reset();
      } else {
        if (!block) return false;
        comm_.throw_if_abandoned();
        idle.pause();
      }
    }
  }

  /// Whether the next chunk to send is ready and the right neighbour has a slot free for it:
  /// once it has finished the chunks of earlier runs (which may have cut its slots
  /// otherwise) and this run's up to a window ago. Its counter is read only while a chunk
  /// is left to send: a neighbour that has received all may free its memory.
  bool writable() const {
    if (written_ == chunks_out_ || (written_ >= own_chunks_ && written_ - own_chunks_ >= next_)) return false;
    const std::uint64_t freed = right_.freed().load(std::memory_order_acquire);
    return freed >= sent_before_ && sent_before_ + written_ < freed + slots_;
  }

  /// Chunk `m` of those this rank sends: its own segment's, then the pieces it forwards.
  segment chunk_out(std::size_t m) const {
    if (m < own_chunks_) return {own_.begin + m * chunk_, std::min(chunk_, own_.size - m * chunk_)};
    const piece& pc = work_.pieces[m - own_chunks_];
    return {pc.begin, pc.size};
  }

  /// Writes chunk `m` of those this rank sends into the right neighbour's slot.
  void write(std::size_t m) {
    const segment out = chunk_out(m);
    W* slot = right_.slot<W>(sent_before_ + m, chunk_, slots_);
    for_each_wire(out.begin, out.size, [&](std::size_t offset, std::span<W> s) {
      std::memcpy(slot + offset, s.data(), s.size_bytes());
      sent_ += s.size_bytes();
    });
    right_.arrived().store(sent_before_ + m + 1, std::memory_order_release);
  }

  bool shared() const { return mine_.base != nullptr; }
  int right() const { return (r_ + 1) % p_; }
  int left() const { return (r_ + p_ - 1) % p_; }

  C& comm_;
  const ring_codec<T, W>& codec_;
  ring_workspace<C, W>& work_;
  span_list<T> data_, original_;  // what the ring reduces; the caller's list when that is a staged copy
  std::span<W> wire_;             // through a wire type: the buffer as it travels
  bool staged_ = false, done_ = false;
  int first_, last_, p_, r_;
  std::size_t chunk_ = 1, slots_ = 1, pieces_ = 0, next_ = 0, posted_ = 0, drained_ = 0, sent_ = 0;
  segment own_{0, 0};                             // the segment this rank sends first
  std::size_t own_chunks_ = 0, chunks_out_ = 0;  // chunks of own_, and all this rank sends
  // Through shared memory (where the landing areas are mapped): chunks written so far, and
  // the chunks over each pair of ranks before this run.
  shared_landing mine_, right_;
  std::size_t written_ = 0;
  std::uint64_t received_before_ = 0, sent_before_ = 0;
};

/// Steps [first, last) of the ring, to the end. Returns the bytes sent.
template <Communicator C, Element T, Element W>
std::size_t ring_steps(C& comm, const span_list<T>& data, const ring_codec<T, W>& codec, ring_workspace<C, W>& work,
                       ring_pipeline shape, int first, int last, std::span<W> wire = {}) {
  ring_run<C, T, W> run(comm, data, codec, work, shape, first, last, wire);
  run.advance(true);
  return run.sent();
}

}  // namespace detail

/// Reduces `data` over all ranks in place, travelling as W: the sum times `codec.scale`
/// (the average, for scale = 1/ranks). Returns the bytes this rank sent.
template <Communicator C, Element T, Element W>
std::size_t ring_allreduce(C& comm, const span_list<T>& data, const ring_codec<T, W>& codec, ring_workspace<C, W>& work,
                           ring_pipeline shape) {
  const int p = comm.size();
  if (p > 1) return detail::ring_steps(comm, data, codec, work, shape, 0, 2 * (p - 1));
  // Alone: the sum is this rank's value, scaled and rounded as the wire would.
  if constexpr (ring_codec<T, W>::in_place) {
    scale_in_place(data, codec.scale);
  } else {
    work.wire.resize(data.size());
    data.for_each(0, data.size(), [&](std::size_t offset, std::span<T> d) {
      const std::span<W> w = std::span<W>(work.wire).subspan(offset, d.size());
      codec.enter(d, w, offset);
      codec.store(d, w);
    });
  }
  return 0;
}

/// The sum times `scale` (1 for a plain sum), in place and in T.
template <Communicator C, Element T>
std::size_t ring_allreduce(C& comm, const span_list<T>& data, T scale, ring_workspace<C, T>& work,
                           ring_pipeline shape) {
  return ring_allreduce(comm, data, ring_codec<T>{scale, {}}, work, shape);
}

/// Sums `data` over all ranks, leaving each rank the sum of its ring_owned_segment only.
template <Communicator C, Element T>
std::size_t ring_reduce_scatter(C& comm, const span_list<T>& data, ring_workspace<C, T>& work, ring_pipeline shape) {
  return detail::ring_steps(comm, data, ring_codec<T>{}, work, shape, 0, comm.size() - 1);
}

/// Copies each rank's ring_owned_segment of `data` to every rank.
template <Communicator C, Element T>
std::size_t ring_allgather(C& comm, const span_list<T>& data, ring_workspace<C, T>& work, ring_pipeline shape) {
  const int p = comm.size();
  return detail::ring_steps(comm, data, ring_codec<T>{}, work, shape, p - 1, 2 * (p - 1));
}

}  // namespace strata::sync
