#pragma once
// The loopback backend: N ranks as N threads of one process, moving real bytes through
// per-rank mailboxes. It exists for fast, deterministic unit tests of everything written
// against the Communicator concept.
//
// Receives match as MPI's do: a message goes to the oldest receive posted for its (group,
// source, tag), straight into that receive's buffer, or waits in the mailbox until one is
// posted; so requests can be tested (Testable) and complete in any order, with the data
// they would have under MPI.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "strata/comm/communicator.hpp"
#include "strata/error.hpp"
#include "strata/numeric/lanes.hpp"

namespace strata::loopback {

class communicator;

namespace detail {
/// A posted receive: filled by its message's sender, or from a waiting message when posted.
struct posted_receive {
  std::span<std::byte> into;
  std::string error;               // the message was of another size
  std::atomic<bool> done = false;  // set last: a test reads it without the mailbox's lock
};
}  // namespace detail

/// The shared state of one group of ranks (and of the groups split from it).
class world {
 public:
  explicit world(int size) : boxes_(static_cast<std::size_t>(size)) {
    if (size < 1) throw std::invalid_argument(fmt::format("loopback::world: size must be at least 1, got {}", size));
  }
  world(const world&) = delete;
  world& operator=(const world&) = delete;

  int size() const { return static_cast<int>(boxes_.size()); }
  communicator rank(int r);

  /// The context id of the `index`-th split of the communicators with context `parent`, for
  /// `color`: the same for every member, and unlike any other group's.
  int child_context(int parent, int index, int color) {
    std::lock_guard lock(contexts_mutex_);
    return contexts_.try_emplace({parent, index, color}, static_cast<int>(contexts_.size()) + 1).first->second;
  }

  /// Wakes every waiting rank with an error: one rank failed, so nobody waits for it forever.
  /// The first rank to abort is kept: it is the cause, later aborts are consequences.
  void abort(int failed_rank) {
    {
      std::lock_guard lock(aborted_mutex_);
      if (aborted_by_ < 0) aborted_by_ = failed_rank;
    }
    for (auto& box : boxes_) {
      std::lock_guard lock(box.mutex);
      if (box.failed_rank < 0) box.failed_rank = failed_rank;
      box.ready.notify_all();
    }
  }

  /// Zeroed memory for a rank's shared segment (SharedMemory), kept until the world ends:
  /// a neighbour may still write into it after its rank has left (one that stopped early).
  std::byte* keep_segment(std::size_t bytes) {
    std::lock_guard lock(segments_mutex_);
    return segments_.emplace_back(std::make_unique<std::byte[]>(bytes)).get();
  }

  /// The rank that aborted first, or -1.
  int aborted_by() {
    std::lock_guard lock(aborted_mutex_);
    return aborted_by_;
  }

 private:
  friend class communicator;
  struct channel {  // one (context, source, tag) of one rank
    std::deque<std::vector<std::byte>> waiting;  // messages no receive was posted for, oldest first
    std::deque<detail::posted_receive*> posted;          // receives no message came for, oldest first
  };
  struct mailbox {
    std::mutex mutex;
    std::condition_variable ready;
    std::map<std::tuple<int, int, int>, channel> channels;  // (context, source, tag), ranks in the world
    std::atomic<int> failed_rank = -1;
  };

  static void fill(detail::posted_receive& r, std::span<const std::byte> bytes, int dest, int source, int tag) {
    if (bytes.size() != r.into.size())
      r.error = fmt::format("loopback rank {}: message from rank {} (tag {}) has {} bytes, the receive expects {}", dest,
                            source, tag, bytes.size(), r.into.size());
    else if (!bytes.empty())
      std::memcpy(r.into.data(), bytes.data(), bytes.size());
    r.done.store(true, std::memory_order_release);
  }

  void deliver(int context, int source, int dest, int tag, std::span<const std::byte> bytes) {
    auto& box = boxes_[static_cast<std::size_t>(dest)];
    {
      std::lock_guard lock(box.mutex);
      channel& c = box.channels[{context, source, tag}];
      if (c.posted.empty()) {
        c.waiting.emplace_back(bytes.begin(), bytes.end());
      } else {  // unlisted first: once filled, its receiver may free it without the lock
        detail::posted_receive& r = *c.posted.front();
        c.posted.pop_front();
        fill(r, bytes, dest, source, tag);
      }
    }
    box.ready.notify_all();
  }

  bool has_message(int context, int dest, int source, int tag) {
    auto& box = boxes_[static_cast<std::size_t>(dest)];
    std::lock_guard lock(box.mutex);
    const auto c = box.channels.find({context, source, tag});
    return c != box.channels.end() && !c->second.waiting.empty();
  }

  /// Posts `r`: filled at once from a waiting message, else by the message's sender.
  void post(int context, int dest, int source, int tag, detail::posted_receive& r) {
    auto& box = boxes_[static_cast<std::size_t>(dest)];
    std::lock_guard lock(box.mutex);
    channel& c = box.channels[{context, source, tag}];
    if (c.waiting.empty()) {
      c.posted.push_back(&r);
    } else {
      fill(r, c.waiting.front(), dest, source, tag);
      c.waiting.pop_front();
    }
  }

  /// Takes back a receive that is going away unfilled, so no sender writes into it.
  void cancel(int context, int dest, int source, int tag, detail::posted_receive& r) {
    auto& box = boxes_[static_cast<std::size_t>(dest)];
    std::lock_guard lock(box.mutex);
    if (const auto c = box.channels.find({context, source, tag}); c != box.channels.end()) std::erase(c->second.posted, &r);
  }

  /// Whether `r` was filled; with `block`, waits until it is. Throws where the message was
  /// of another size, or where a rank failed before it came.
  bool finished(int dest, int source, int tag, detail::posted_receive& r, bool block) {
    auto& box = boxes_[static_cast<std::size_t>(dest)];
    // A test takes no lock unless it must wait or report a failure: the rings test hundreds
    // of times per message, and `done` is stored last, after the bytes and any error.
    const auto filled = [&] {
      if (!r.error.empty()) throw comm_error(r.error);
      return true;
    };
    if (r.done.load(std::memory_order_acquire)) return filled();
    if (!block && box.failed_rank.load() < 0) return false;
    std::unique_lock lock(box.mutex);
    if (block) box.ready.wait(lock, [&] { return r.done || box.failed_rank >= 0; });
    if (r.done) return filled();
    if (box.failed_rank >= 0)
      throw comm_error(fmt::format("loopback rank {}: gave up receiving from rank {} (tag {}) because rank {} failed", dest,
                                   source, tag, box.failed_rank.load()));
    return false;
  }

  std::deque<mailbox> boxes_;  // deque: mailboxes hold a mutex and never move
  std::mutex aborted_mutex_;
  int aborted_by_ = -1;
  std::mutex contexts_mutex_;
  std::map<std::tuple<int, int, int>, int> contexts_;  // (parent, index, color) -> context; the world's is 0
  std::mutex segments_mutex_;
  std::vector<std::unique_ptr<std::byte[]>> segments_;
};

/// One rank's view of a loopback world, or of a group split from it. Ranks are relative to
/// the group; the world sees their world ranks.
class communicator {
 public:
  /// Sends complete at once (the bytes are copied); receives once their message is in
  /// their buffer. One that goes away unfinished is taken back, so no sender writes into it.
  class request {
   public:
    request() = default;
    request(request&&) noexcept = default;
    /// The receives this request had are taken back before the buffer they fill may go.
    request& operator=(request&& other) noexcept {
      receives_ = std::move(other.receives_);
      then_ = std::move(other.then_);
      return *this;
    }

   private:
    friend class communicator;
    struct receive {
      world* w;
      int context, dest, source, tag;  // ranks in the world
      detail::posted_receive posted;
    };
    struct take_back {
      void operator()(receive* r) const {
        // A filled receive was unlisted before it was filled; one that is not may be filled
        // meanwhile, and cancel() under the lock then finds nothing to take back.
        if (!r->posted.done.load(std::memory_order_acquire))
          r->w->cancel(r->context, r->dest, r->source, r->tag, r->posted);
        delete r;
      }
    };
    // then_ may own the buffer the receives fill (an all-reduce's incoming contributions),
    // so it is declared first and outlives them: an unfinished request, given up when a rank
    // failed, takes its receives back before that buffer is freed, or a sender writes into
    // freed memory.
    std::function<void()> then_;  // once every receive is filled (an all-reduce's sum)
    std::vector<std::unique_ptr<receive, take_back>> receives_;
  };

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(members_.size()); }
  std::string_view backend_name() const { return "loopback"; }
  /// Every thread shares one machine.
  int node_color() const { return 0; }

  template <class T>
    requires Element<T> || std::same_as<T, std::byte>
  request isend(std::span<const T> data, int dest, int tag) {
    send_bytes(dest, tag, std::as_bytes(data));
    return {};
  }

  /// Whether a message from `source` with `tag` is waiting, without receiving it.
  bool iprobe(int source, int tag) { return world_->has_message(context_, world_rank(rank_), world_rank(source), tag); }

  template <class T>
    requires Element<T> || std::same_as<T, std::byte>
  request irecv(std::span<T> data, int source, int tag) {
    request r;
    post(r, std::as_writable_bytes(data), source, tag);
    return r;
  }

  /// Sums in rank order on every rank, so all ranks get bitwise-identical results.
  template <Element T>
  request iallreduce_sum(std::span<T> data) {
    for (int r = 0; r < size(); ++r)
      if (r != rank_) send_bytes(r, allreduce_tag, std::as_bytes(std::span<const T>(data)));
    // Rank r's contribution lands at r * size; this rank's own stays in `data`.
    const auto from = [incoming = std::make_shared<std::vector<T>>(data.size() * members_.size()), n = data.size()](
                          int r) { return std::span<T>(*incoming).subspan(static_cast<std::size_t>(r) * n, n); };
    request out;
    for (int r = 0; r < size(); ++r)
      if (r != rank_) post(out, std::as_writable_bytes(from(r)), r, allreduce_tag);
    out.then_ = [this, data, from] {
      std::vector<T> sum(data.size(), T{});
      for (int r = 0; r < size(); ++r) {
        const std::span<const T> contribution = r == rank_ ? data : from(r);
        lanes::add(sum.data(), contribution.data(), sum.data(), data.size());  // as the MPI backend sums
      }
      std::copy(sum.begin(), sum.end(), data.begin());
    };
    return out;
  }

  template <Element T>
  void allreduce_sum(std::span<T> data) {
    request r = iallreduce_sum(data);
    wait(r);
  }

  void wait(request& r) { complete(r, true); }

  /// Whether `r` has completed (its receives filled), without blocking.
  bool test(request& r) { return complete(r, false); }

  template <class T>
  void broadcast(std::span<T> data, int root) {
    if (rank_ == root) {
      for (int r = 0; r < size(); ++r)
        if (r != root) send_bytes(r, broadcast_tag, std::as_bytes(std::span<const T>(data)));
    } else {
      receive_into(std::as_writable_bytes(data), root, broadcast_tag);
    }
  }

  void barrier() {
    std::byte token{};
    for (int r = 0; r < size(); ++r)
      if (r != rank_) send_bytes(r, barrier_tag, {&token, 1});
    for (int r = 0; r < size(); ++r)
      if (r != rank_) receive_into({&token, 1}, r, barrier_tag);
  }

  template <class T>
    requires std::is_trivially_copyable_v<T>
  request iallgather(std::span<const T> mine, std::span<T> all) {
    const std::size_t n = mine.size();
    if (all.size() != n * members_.size())
      throw comm_error(fmt::format("loopback rank {}: allgather of {} elements from each of {} ranks into {} elements",
                                   rank_, n, size(), all.size()));
    for (int r = 0; r < size(); ++r)
      if (r != rank_) send_bytes(r, allgather_tag, std::as_bytes(mine));
    request out;
    for (int r = 0; r < size(); ++r) {
      const std::span<T> block = all.subspan(static_cast<std::size_t>(r) * n, n);
      if (r == rank_) std::ranges::copy(mine, block.begin());
      else post(out, std::as_writable_bytes(block), r, allgather_tag);
    }
    return out;
  }

  template <class T>
    requires std::is_trivially_copyable_v<T>
  void allgather(std::span<const T> mine, std::span<T> all) {
    request r = iallgather(mine, all);
    wait(r);
  }

  /// Every rank's segment of this process's memory (SharedMemory: the ranks are threads).
  std::span<std::byte* const> shared_segments(std::size_t bytes) {
    segments& s = *segments_;
    if (!s.bases.empty() && bytes <= s.bytes) return s.bases;
    constexpr std::size_t line = 64;  // the ring keeps its counters a cache line apart
    const std::uintptr_t mine[1] = {(reinterpret_cast<std::uintptr_t>(world_->keep_segment(bytes + line)) + line - 1) /
                                    line * line};
    std::vector<std::uintptr_t> all(members_.size());
    allgather(std::span<const std::uintptr_t>(mine), std::span<std::uintptr_t>(all));
    s.bases.clear();
    for (std::uintptr_t base : all) s.bases.push_back(reinterpret_cast<std::byte*>(base));
    s.bytes = bytes;
    return s.bases;
  }

  /// Throws once a rank has given up the job: a wait on shared memory would otherwise wait
  /// for it forever.
  void throw_if_abandoned() {
    if (const int failed = world_->aborted_by(); failed >= 0)
      throw comm_error(fmt::format("loopback rank {}: gave up waiting on shared memory because rank {} failed", rank_,
                                   failed));
  }

  /// The ranks are threads of one process (PeerReads): another's memory is this one's.
  /// Once a rank has failed, reads throw as waits do: its memory may be going away.
  bool peer_reads() const { return true; }
  void read_peer(int, std::span<const peer_range> from, std::span<std::byte> into) {
    throw_if_abandoned();
    std::size_t at = 0;
    for (const peer_range& r : from) {
      std::memcpy(into.data() + at, reinterpret_cast<const void*>(r.address), r.bytes);
      at += r.bytes;
    }
  }

  /// PeerViews: every rank sees every other's memory where it lies; once a rank has failed,
  /// a view throws, as a read does.
  shared_region region_of(const void*) const { return {1, -1, 0, std::numeric_limits<std::size_t>::max()}; }
  const std::byte* view_peer(int, const shared_region&, std::uintptr_t address) {
    throw_if_abandoned();
    return reinterpret_cast<const std::byte*>(address);
  }

  /// Each member learns every rank's (color, key) and so computes the same group and the
  /// same context id. Each communicator object numbers its own splits.
  communicator split(int color, int key) {
    const int mine[] = {color, key};
    std::vector<int> all(2 * members_.size());  // (color, key) of each rank
    allgather(std::span<const int>(mine), std::span<int>(all));
    std::vector<int> group;  // ranks here with this color, ordered by (key, rank)
    for (int r = 0; r < size(); ++r)
      if (all[2 * static_cast<std::size_t>(r)] == color) group.push_back(r);
    std::ranges::stable_sort(group, {}, [&](int r) { return all[2 * static_cast<std::size_t>(r) + 1]; });
    std::vector<int> members;
    for (int r : group) members.push_back(members_[static_cast<std::size_t>(r)]);
    const int rank = static_cast<int>(std::ranges::find(group, rank_) - group.begin());
    return communicator(*world_, world_->child_context(context_, splits_++, color), std::move(members), rank);
  }

 private:
  friend class world;
  // Collectives use reserved negative tags; per-pair FIFO order keeps successive calls apart.
  static constexpr int allreduce_tag = -1, broadcast_tag = -2, barrier_tag = -3, allgather_tag = -4;

  communicator(world& w, int context, std::vector<int> members, int rank)
      : world_(&w), context_(context), members_(std::move(members)), rank_(rank) {}

  int world_rank(int r) const { return members_[static_cast<std::size_t>(r)]; }

  void send_bytes(int dest, int tag, std::span<const std::byte> bytes) {
    world_->deliver(context_, world_rank(rank_), world_rank(dest), tag, bytes);
  }

  void receive_into(std::span<std::byte> out, int source, int tag) {
    request r;
    post(r, out, source, tag);
    wait(r);
  }

  void post(request& r, std::span<std::byte> into, int source, int tag) {
    auto& receive = r.receives_.emplace_back(
        new request::receive{world_, context_, world_rank(rank_), world_rank(source), tag, {.into = into, .error = {}}});
    world_->post(receive->context, receive->dest, receive->source, tag, receive->posted);
  }

  /// Whether every receive of `r` is filled (with `block`, once it is), then what follows them.
  bool complete(request& r, bool block) {
    for (auto& receive : r.receives_)
      if (!world_->finished(receive->dest, receive->source, receive->tag, receive->posted, block)) return false;
    r.receives_.clear();
    if (r.then_) std::exchange(r.then_, {})();
    return true;
  }

  struct segments {
    std::vector<std::byte*> bases;
    std::size_t bytes = 0;
  };

  world* world_;
  int context_;               // keeps this group's messages apart from every other group's
  std::vector<int> members_;  // world rank of each rank here
  int rank_;
  int splits_ = 0;            // numbers the next split, for its context id
  std::shared_ptr<segments> segments_ = std::make_shared<segments>();  // shared by copies
};

inline communicator world::rank(int r) {
  if (r < 0 || r >= size()) throw std::out_of_range(fmt::format("loopback::world: rank {} outside [0, {})", r, size()));
  std::vector<int> everyone(boxes_.size());
  std::iota(everyone.begin(), everyone.end(), 0);
  return communicator(*this, 0, std::move(everyone), r);
}

/// One rank's communicators, one per purpose (see CommContext).
class context {
 public:
  context(world& collectives, world& parameter_server, world& control, int rank)
      : worlds_{&control, &collectives, &parameter_server}, collectives_(collectives.rank(rank)),
        parameter_server_(parameter_server.rank(rank)), control_(control.rank(rank)) {}
  int rank() const { return control_.rank(); }
  int size() const { return control_.size(); }
  communicator& collectives() { return collectives_; }
  communicator& parameter_server() { return parameter_server_; }
  communicator& control() { return control_; }

  /// Gives up on the job: every rank's waits fail from now on (as MPI_Abort ends them).
  /// The control world first: its record names the rank that gave up on purpose (run()), and
  /// must hold it before a rank woken on another world fails and aborts in turn.
  void abort() {
    for (world* w : worlds_) w->abort(rank());
  }

 private:
  world* worlds_[3];  // control first (see abort)
  communicator collectives_, parameter_server_, control_;
};

/// Runs `body(context&)` on `size` threads, one per rank, and rethrows the first failure
/// after every thread has finished (a failing rank releases the others).
template <class Body>
void run(int size, Body body) {
  world collectives(size), parameter_server(size), control(size);
  world* worlds[] = {&collectives, &parameter_server, &control};
  std::vector<std::exception_ptr> failures(static_cast<std::size_t>(size));
  std::atomic<int> first_failure{-1};  // the cause; later failures are its consequences
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < size; ++r)
      threads.emplace_back([&, r] {
        try {
          context c(collectives, parameter_server, control, r);
          body(c);
        } catch (...) {
          failures[static_cast<std::size_t>(r)] = std::current_exception();
          int none = -1;
          if (first_failure.compare_exchange_strong(none, r))
            for (world* w : worlds) w->abort(r);
        }
      });
  }
  // A rank that aborted the job on purpose (a timeout) is the cause even if another rank's
  // consequent failure was caught first.
  const int cause = control.aborted_by() >= 0 && failures[static_cast<std::size_t>(control.aborted_by())]
                        ? control.aborted_by()
                        : first_failure.load();
  if (cause >= 0) std::rethrow_exception(failures[static_cast<std::size_t>(cause)]);
}

static_assert(Communicator<communicator> && Testable<communicator> && SharedMemory<communicator> &&
              PeerReads<communicator> && CommContext<context>);

}  // namespace strata::loopback
