#pragma once
// The sim backend: NCCL's semantics on the simulated device (sim/device.hpp), ranks as
// threads of one process, so that the code written against nccl::communicator runs in CI
// at 2-8 ranks. Its interface is nccl::communicator's, name for name.
//
// What it models, as NCCL does it:
// - Every operation runs on the communicator's stream; a collective starts there only
//   when every rank has enqueued it, and its outputs appear when it completes on each
//   rank's stream. Reductions add the ranks' values in rank order (deterministic);
//   averages of floating types multiply each value by 1/size() before the sum (ncclAvg).
// - Sends and receives are posted and start together, as one group, at the next wait or
//   collective; a send completes when its receive has copied it; a pair's messages match
//   in posting order and must have equal sizes.
// - abort() fails this rank's pending and later operations; the peers go on waiting, as
//   NCCL's do, until their own deadline.
// What it adds: the ranks' operation sequences are compared, so two ranks that call
// different collectives (or the same with another type, count or root) fail at once with a
// comm_error naming both ranks and both calls, where NCCL would hang or mix buffers; and a
// wait that passes the deadline names the ranks that never reached the collective, from
// each rank's count of collectives reached.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "strata/comm/communicator.hpp"
#include "strata/comm/loopback/loopback.hpp"
#include "strata/detail/text.hpp"
#include "strata/error.hpp"
#include "strata/numeric/float16.hpp"
#include "strata/sim/device.hpp"

namespace strata::sim {

namespace detail {

template <class T>
constexpr std::string_view type_name() {
  if constexpr (std::is_same_v<T, float>) return "fp32";
  else if constexpr (std::is_same_v<T, double>) return "fp64";
  else if constexpr (std::is_same_v<T, half>) return "fp16";
  else if constexpr (std::is_same_v<T, bfloat16>) return "bf16";
  else return "bytes";
}

/// One rank's call of a collective: what the ranks must agree on, and its buffers.
struct call {
  std::string name;  // "allreduce sum"
  std::string_view type;
  std::size_t count = 0;
  int root = -1;
  const void* in = nullptr;
  void* out = nullptr;

  bool same_as(const call& o) const { return name == o.name && type == o.type && count == o.count && root == o.root; }
  std::string text() const {
    std::string t = strata::detail::cat(name, " (", type, " x ", count);
    if (root >= 0) t += strata::detail::cat(", root ", root);
    return t + ")";
  }
};

/// A posted send, waiting for its receive.
struct message {
  const void* data;
  std::size_t bytes;
  bool received = false;
};

}  // namespace detail

/// The shared state of one communicator's ranks (what an ncclUniqueId names).
class world {
 public:
  explicit world(int size) : size_(size), reached_(static_cast<std::size_t>(size), 0), aborted_(static_cast<std::size_t>(size)) {
    if (size < 1) throw usage_error(strata::detail::cat("sim::world: size must be at least 1, got ", size));
  }
  int size() const { return size_; }

  /// Rank `rank`'s collective number `seq` (0, 1, ...): waits until every rank has reached
  /// it; then the last to arrive runs `body(calls)` over every rank's call, while the others
  /// wait for it. Throws comm_error when the calls differ or this rank was aborted.
  template <class Body>
  void collective(int rank, std::uint64_t seq, detail::call mine, Body&& body) {
    std::unique_lock lock(mutex_);
    if (aborted_[index(rank)]) throw aborted_error(rank, mine);
    slot& s = slots_[seq];
    if (s.calls.empty()) s.calls.resize(index(size_));
    for (int r = 0; r < size_ && s.error.empty(); ++r)
      if (const auto& other = s.calls[index(r)]; other && !other->same_as(mine))
        s.error = strata::detail::cat("sim::communicator: the ranks called different collectives as their collective #", seq,
                            ": rank ", r, " called ", other->text(), ", rank ", rank, " called ", mine.text(),
                            "; every rank must make the same collective calls in the same order");
    s.calls[index(rank)] = std::move(mine);
    reached_[index(rank)] = seq + 1;
    if (++s.arrived == size_ && s.error.empty()) {
      std::vector<detail::call> calls;
      for (auto& c : s.calls) calls.push_back(*c);
      body(std::span<const detail::call>(calls));  // under the lock: the ranks' streams are all here
      s.done = true;
    }
    changed_.notify_all();
    changed_.wait(lock, [&] { return s.done || !s.error.empty() || aborted_[index(rank)]; });
    const std::string error = s.error;
    const bool done = s.done;
    if (++s.left == size_) slots_.erase(seq);  // a failed one stays: a late rank still finds its error
    if (!error.empty()) throw comm_error(error);
    if (!done) throw comm_error(strata::detail::cat("sim::communicator on rank ", rank, ": aborted while waiting in collective #", seq));
  }

  /// Rank `from`'s posted send to `to`.
  void post_send(int from, int to, detail::message* m) {
    std::lock_guard lock(mutex_);
    channels_[{from, to}].push_back(m);
    changed_.notify_all();
  }

  /// Rank `to` receives the oldest send from `from` into `into`.
  void receive(int from, int to, std::span<std::byte> into) {
    std::unique_lock lock(mutex_);
    auto& channel = channels_[{from, to}];
    changed_.wait(lock, [&] { return !channel.empty() || aborted_[index(to)]; });
    if (aborted_[index(to)]) throw comm_error(strata::detail::cat("sim::communicator on rank ", to, ": aborted while receiving from rank ", from));
    detail::message* m = channel.front();
    if (m->bytes != into.size())
      throw comm_error(strata::detail::cat("sim::communicator: rank ", from, " sent ", m->bytes, " bytes to rank ", to,
                                 ", which posted a receive of ", into.size(),
                                 " bytes; NCCL pairs sends and receives in posting order and needs equal sizes"));
    std::memcpy(into.data(), m->data, into.size());
    m->received = true;
    channel.pop_front();
    changed_.notify_all();
  }

  /// Waits until `m` (rank `from`'s) has been received.
  void await_receipt(int from, int to, const detail::message& m) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return m.received || aborted_[index(from)]; });
    if (!m.received) throw comm_error(strata::detail::cat("sim::communicator on rank ", from, ": aborted while sending to rank ", to));
  }

  /// Rank `rank`'s split number `seq` with (color, key): waits, until `until`, for every
  /// rank's; returns the world of its color (ranks ordered by key, then by rank) and its
  /// rank there. Throws timeout_error naming the ranks that did not call it, comm_error
  /// when this rank was aborted.
  std::pair<std::shared_ptr<world>, int> split(int rank, std::uint64_t seq, int color, int key,
                                               std::chrono::steady_clock::time_point until) {
    std::unique_lock lock(mutex_);
    split_round& round = splits_[seq];
    if (round.asked.empty()) round.asked.resize(index(size_));
    round.asked[index(rank)] = std::pair{color, key};
    if (++round.arrived == size_) {
      std::map<int, std::vector<std::pair<int, int>>> members;  // color -> (key, rank)
      for (int r = 0; r < size_; ++r) members[round.asked[index(r)]->first].push_back({round.asked[index(r)]->second, r});
      round.placed.resize(index(size_));
      for (auto& [c, ranks] : members) {
        std::sort(ranks.begin(), ranks.end());
        auto child = std::make_shared<world>(static_cast<int>(ranks.size()));
        for (std::size_t i = 0; i < ranks.size(); ++i) round.placed[index(ranks[i].second)] = {child, static_cast<int>(i)};
      }
    }
    changed_.notify_all();
    const bool done = changed_.wait_until(lock, until, [&] { return !round.placed.empty() || aborted_[index(rank)]; });
    if (aborted_[index(rank)]) throw comm_error(strata::detail::cat("sim::communicator on rank ", rank, ": aborted in split #", seq));
    if (!done) {
      std::vector<std::string> late;
      for (int r = 0; r < size_; ++r)
        if (!round.asked[index(r)]) late.push_back(strata::detail::cat("rank ", r));
      throw timeout_error(strata::detail::cat("sim::communicator::split on rank ", rank, ": split #", seq, " waits for ",
                                              strata::detail::join(late, ", ")));
    }
    auto placed = round.placed[index(rank)];
    if (++round.left == size_) splits_.erase(seq);
    return placed;
  }

  void abort(int rank) {
    {
      std::lock_guard lock(mutex_);
      aborted_[index(rank)] = true;
    }
    changed_.notify_all();
  }

  /// The ranks that have not reached collective `seq` (numbered from 0), with how many each
  /// has reached: what a deadline's message names.
  std::string missing(std::uint64_t seq) const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> late;
    for (int r = 0; r < size_; ++r)
      if (reached_[index(r)] <= seq) late.push_back(strata::detail::cat("rank ", r, " (", reached_[index(r)], " reached)"));
    if (late.empty()) return "";
    return strata::detail::cat("collective #", seq, " waits for ", strata::detail::join(late, ", "));
  }

  /// The number of collectives rank `rank` has reached.
  std::uint64_t reached(int rank) const {
    std::lock_guard lock(mutex_);
    return reached_[index(rank)];
  }

 private:
  struct slot {
    std::vector<std::optional<detail::call>> calls;
    int arrived = 0, left = 0;
    bool done = false;
    std::string error;
  };
  static std::size_t index(int rank) { return static_cast<std::size_t>(rank); }
  static comm_error aborted_error(int rank, const detail::call& c) {
    return comm_error(strata::detail::cat("sim::communicator on rank ", rank, ": ", c.text(), " after the communicator was aborted"));
  }

  int size_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::uint64_t, slot> slots_;
  std::vector<std::uint64_t> reached_;
  std::vector<char> aborted_;
  std::map<std::pair<int, int>, std::deque<detail::message*>> channels_;
  struct split_round {
    std::vector<std::optional<std::pair<int, int>>> asked;  // each rank's (color, key)
    std::vector<std::pair<std::shared_ptr<world>, int>> placed;
    int arrived = 0, left = 0;
  };
  std::map<std::uint64_t, split_round> splits_;
};

namespace detail {

/// Reductions in T's own arithmetic, as NCCL's kernels do them: each addition rounded to T.
template <class T>
T add(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return a + b;
  else return T(static_cast<float>(a) + static_cast<float>(b));
}
template <class T>
T scale(T a, float s) {
  if constexpr (std::is_floating_point_v<T>) return a * static_cast<T>(s);
  else return T(static_cast<float>(a) * s);
}

/// out[i] = the ranks' in[i] added in rank order (each pre-multiplied by `factor` if set).
template <class T>
void reduce(std::span<const call> calls, std::size_t begin, std::size_t n, std::optional<float> factor, T* out) {
  for (std::size_t i = 0; i < n; ++i) {
    T acc{};
    for (std::size_t r = 0; r < calls.size(); ++r) {
      T x = static_cast<const T*>(calls[r].in)[begin + i];
      if (factor) x = scale(x, *factor);
      acc = r == 0 ? x : add(acc, x);
    }
    out[i] = acc;
  }
}

}  // namespace detail

/// What sends and receives move: elements, or bytes (as nccl::Payload).
template <class T>
concept Payload = Element<T> || std::same_as<T, std::byte>;

struct options {
  /// How long a wait may take before timeout_error: STRATA_TIMEOUT_SECONDS, as every wait.
  std::chrono::milliseconds timeout = std::chrono::ceil<std::chrono::milliseconds>(default_timeout());
};

/// One rank's communicator; copies share it. One thread at a time drives it.
class communicator {
 public:
  /// An operation enqueued; waiting one that finished is a no-op.
  struct request {
    std::uint64_t ticket = 0;
  };

  /// Joins `w` as `rank`, on device `d`, with a stream of its own named after the rank.
  communicator(std::shared_ptr<world> w, int rank, device& d, options opts = {})
      : state_(std::make_shared<state>(std::move(w), rank, d, opts)) {
    if (rank < 0 || rank >= state_->world->size())
      throw usage_error(strata::detail::cat("sim::communicator: rank ", rank, " outside [0, ", state_->world->size(), ")"));
  }

  int rank() const { return state_->rank; }
  int size() const { return state_->world->size(); }
  std::string_view backend_name() const { return "sim"; }
  int node_color() const { return 0; }
  /// The simulated GPU every buffer must live on.
  sim::device& device() const { return state_->dev; }
  /// The stream all of this communicator's operations run on.
  stream_t stream() const { return state_->stream; }

  device_buffer<float> allocate(std::size_t n) const { return device_buffer<float>(n, stream()); }

  /// Orders this communicator's later operations after the work queued so far on `producer`.
  /// The simulated device has no legacy default stream: a null `producer` is refused.
  void depend_on(stream_t producer) {
    if (!producer)
      throw usage_error(strata::detail::cat("sim::communicator::depend_on on rank ", rank(),
                                            ": no stream given; pass the stream that produced the data (an "
                                            "executor's initialized_on option, the stream given to step())"));
    if (producer == stream()) return;
    event e;
    e.record(producer);
    state_->dev.wait_event(stream(), e);
  }

  /// Posted; starts at the next wait or collective.
  template <Payload T>
  request isend(std::span<const T> data, int dest, int /*tag*/) {
    check_peer(dest, "isend");
    state_->pending.push_back({true, dest, const_cast<T*>(data.data()), data.size_bytes()});
    return {};
  }
  template <Payload T>
  request irecv(std::span<T> data, int source, int /*tag*/) {
    check_peer(source, "irecv");
    state_->pending.push_back({false, source, data.data(), data.size_bytes()});
    return {};
  }

  template <Element T>
  request iallreduce_sum(std::span<T> data) {
    return reduction("allreduce sum", data, false, false);
  }
  /// The mean over the ranks, in place, each value pre-multiplied by 1/size() (ncclAvg).
  template <Element T>
  request iallreduce_average(std::span<T> data) {
    return reduction("allreduce average", data, true, false);
  }
  /// In place: this rank's block (at rank() * block) becomes the sum of every rank's block
  /// of that index; the other blocks are unspecified (here: left as they were).
  template <Element T>
  request ireduce_scatter_sum(std::span<T> data) {
    return reduction("reduce_scatter sum", data, false, true);
  }
  template <Element T>
  request ireduce_scatter_average(std::span<T> data) {
    return reduction("reduce_scatter average", data, true, true);
  }
  /// In place: every rank's block (rank r's at r * block) reaches every rank.
  template <Element T>
  request iallgather_blocks(std::span<T> data) {
    const std::size_t block = equal_blocks(data.size(), "allgather");
    return launch({"allgather", detail::type_name<T>(), data.size(), -1, data.data(), data.data()},
                  [block](std::span<const detail::call> calls) {
                    for (const detail::call& to : calls)
                      for (std::size_t r = 0; r < calls.size(); ++r)
                        if (to.out != calls[r].out)
                          std::memcpy(static_cast<T*>(to.out) + r * block, static_cast<const T*>(calls[r].in) + r * block,
                                      block * sizeof(T));
                  });
  }

  template <Element T>
  void allreduce_sum(std::span<T> data) {
    request r = iallreduce_sum(data);
    wait(r);
  }

  /// Returns once the operation (and everything before it on the stream) has finished;
  /// starts posted sends and receives first. Throws timeout_error naming the ranks that
  /// never reached the collective this rank waits in, comm_error on a failure.
  void wait(request& /*r*/) {
    start_pending();
    drain();  // the stream is in order: what is queued now covers the request
  }

  /// Returns once everything enqueued on stream() so far has finished.
  void synchronize() { drain(); }

  /// Blocks the host until `e` (recorded on a stream of this rank's device) has completed,
  /// within the deadline: past it, this rank's operations are aborted and timeout_error
  /// names `call`, the ranks that never reached the collective this rank waits in, and
  /// every stream's pending work.
  void wait_event(const event& e, std::string_view call) {
    if (!state_->abort_reason.empty())
      throw comm_error(strata::detail::cat("sim::communicator on rank ", rank(), ": ", call, " after abort (",
                                           state_->abort_reason, ")"));
    try {
      state_->dev.synchronize(e, strata::detail::cat(" on rank ", rank(), " (", call, ")"));
    } catch (const timeout_error& t) {
      const std::string late = state_->world->missing(state_->waiting_in);
      abort("timed out");
      throw timeout_error(late.empty() ? std::string(t.what()) : strata::detail::cat(t.what(), late));
    }
  }

  /// Returns once nothing enqueued on stream() still runs, for destructors: never throws.
  /// Past the deadline this rank's operations are aborted, which ends them at once.
  void quiesce() noexcept {
    for (int attempt = 0; attempt < 2; ++attempt) {
      try {
        state_->dev.synchronize(stream());
        return;
      } catch (const timeout_error&) {
        abort("given up while its stream was drained for a destructor");
      } catch (...) {
        return;  // a failed stream has skipped the rest of its work: it is drained
      }
    }
  }

  /// Any trivially copyable type, from rank `root`, in place.
  template <class T>
    requires std::is_trivially_copyable_v<T>
  void broadcast(std::span<T> data, int root) {
    check_peer(root, "broadcast");
    request r = launch({"broadcast", detail::type_name<T>(), data.size(), root, data.data(), data.data()},
                       [root](std::span<const detail::call> calls) {
                         const detail::call& from = calls[static_cast<std::size_t>(root)];
                         for (const detail::call& to : calls)
                           if (to.out != from.in) std::memcpy(to.out, from.in, to.count * sizeof(T));
                       });
    wait(r);
  }

  /// A one-element all-reduce: returns once every rank has reached it.
  void barrier() {
    request r = launch({"barrier", "bytes", 0, -1, nullptr, nullptr}, [](std::span<const detail::call>) {});
    wait(r);
  }

  /// Any trivially copyable type; rank i's block lands at i * mine.size().
  template <class T>
    requires std::is_trivially_copyable_v<T>
  void allgather(std::span<const T> mine, std::span<T> all) {
    if (all.size() != mine.size() * static_cast<std::size_t>(size()))
      throw usage_error(strata::detail::cat("sim::communicator::allgather on rank ", rank(), ": the result holds ", all.size(),
                                  " elements, not ", size(), " x ", mine.size()));
    request r = launch({"allgather", detail::type_name<T>(), mine.size(), -1, mine.data(), all.data()},
                       [](std::span<const detail::call> calls) {
                         for (const detail::call& to : calls)
                           for (std::size_t r = 0; r < calls.size(); ++r)
                             std::memcpy(static_cast<T*>(to.out) + r * to.count, calls[r].in, to.count * sizeof(T));
                       });
    wait(r);
  }

  /// Collective (ncclCommSplit): the ranks of one color, ordered by (key, rank), as a
  /// communicator of their own on the same device, with a stream of its own. `color` must
  /// be non-negative. Waits within the deadline; past it this communicator is aborted.
  communicator split(int color, int key) {
    if (color < 0)
      throw usage_error(strata::detail::cat("sim::communicator::split on rank ", rank(), ": color ", color, " is negative"));
    start_pending();
    const auto until = std::chrono::steady_clock::now() + state_->opts.timeout;
    try {
      auto [child, child_rank] = state_->world->split(rank(), state_->splits++, color, key, until);
      return communicator(std::move(child), child_rank, state_->dev, state_->opts);
    } catch (const timeout_error&) {
      abort("a split timed out");
      throw;
    }
  }

  /// Gives up: this rank's pending and later operations fail with comm_error.
  void abort(std::string reason = "aborted by the caller") noexcept {
    state_->abort_reason = std::move(reason);
    state_->world->abort(rank());
  }

  /// The number of collectives this rank has reached on its stream.
  std::uint64_t collectives_reached() const { return state_->world->reached(rank()); }

 private:
  struct transfer {
    bool send;
    int peer;
    void* data;
    std::size_t bytes;
  };

  struct state {
    state(std::shared_ptr<sim::world> w, int r, sim::device& d, options o)
        : world(std::move(w)), rank(r), dev(d), opts(o), owned(d.make_stream(strata::detail::cat("communicator of rank ", r))),
          stream(owned.get()) {}
    ~state() {
      // What was enqueued finishes (or fails at its deadline) before the stream goes.
      try {
        dev.synchronize(stream);
      } catch (...) {
        world->abort(rank);
      }
    }
    std::shared_ptr<sim::world> world;
    int rank;
    sim::device& dev;
    options opts;
    std::unique_ptr<sim::stream> owned;
    stream_t stream;
    std::uint64_t collectives = 0;             // enqueued
    std::uint64_t splits = 0;
    std::atomic<std::uint64_t> waiting_in{0};  // the collective the stream reached last (for reports)
    std::vector<transfer> pending;
    std::string abort_reason;
  };

  template <class T>
  request reduction(const char* name, std::span<T> data, bool average, bool scatter) {
    const std::size_t block = scatter ? equal_blocks(data.size(), name) : data.size();
    return launch({name, detail::type_name<T>(), data.size(), -1, data.data(), data.data()},
                  [average, scatter, block](std::span<const detail::call> calls) {
                    const std::optional<float> factor =
                        average ? std::optional<float>(1.0f / static_cast<float>(calls.size())) : std::nullopt;
                    if (scatter) {
                      for (std::size_t r = 0; r < calls.size(); ++r)
                        detail::reduce<T>(calls, r * block, block, factor, static_cast<T*>(calls[r].out) + r * block);
                    } else {
                      std::vector<T> sum(block);
                      detail::reduce<T>(calls, 0, block, factor, sum.data());
                      for (const detail::call& to : calls) std::memcpy(to.out, sum.data(), block * sizeof(T));
                    }
                  });
  }

  std::size_t equal_blocks(std::size_t elements, std::string_view call) const {
    const auto n = static_cast<std::size_t>(size());
    if (elements % n != 0)
      throw usage_error(strata::detail::cat("sim::communicator::", call, " on rank ", rank(), ": ", elements,
                                  " elements do not split into ", n, " equal blocks"));
    return elements / n;
  }

  void check_peer(int peer, std::string_view call) const {
    if (peer < 0 || peer >= size())
      throw usage_error(strata::detail::cat("sim::communicator::", call, " on rank ", rank(), ": rank ", peer, " outside [0, ", size(), ")"));
  }

  /// Enqueues a collective after the posted transfers.
  template <class Body>
  request launch(detail::call c, Body body) {
    start_pending();
    const std::uint64_t seq = state_->collectives++;
    std::shared_ptr<sim::world> w = state_->world;
    const int r = rank();
    std::string what = strata::detail::cat(c.text(), ", collective #", seq);
    state* s = state_.get();
    return {stream()->enqueue(std::move(what), [w, r, seq, c = std::move(c), body = std::move(body), s]() mutable {
      s->waiting_in = seq;
      w->collective(r, seq, std::move(c), body);
    })};
  }

  /// Starts the posted sends and receives as one group on the stream.
  void start_pending() {
    if (state_->pending.empty()) return;
    std::vector<transfer> group = std::move(state_->pending);
    state_->pending.clear();
    std::shared_ptr<sim::world> w = state_->world;
    const int me = rank();
    stream()->enqueue(strata::detail::cat("group of ", group.size(), " sends and receives"), [w, me, group = std::move(group)] {
      std::deque<detail::message> sent;  // stable addresses
      for (const transfer& t : group)
        if (t.send) w->post_send(me, t.peer, &sent.emplace_back(detail::message{t.data, t.bytes}));
      for (const transfer& t : group)
        if (!t.send) w->receive(t.peer, me, {static_cast<std::byte*>(t.data), t.bytes});
      std::size_t k = 0;
      for (const transfer& t : group)
        if (t.send) w->await_receipt(me, t.peer, sent[k++]);
    });
  }

  void drain() {
    event e;
    e.record(stream());
    wait_event(e, "wait");
  }

  std::shared_ptr<state> state_;
};

/// One rank's communicators, as nccl::context's: the collectives on the simulated device
/// with NCCL's semantics; the parameter server and the control channel (handshakes,
/// deadlines, checkpoints) over loopback, host memory, as nccl::context's go over MPI. So a
/// mesh, the pipeline driver and the tensor-parallel helpers run over it as over NCCL.
class context {
 public:
  context(communicator collectives, loopback::world& parameter_server, loopback::world& control)
      : worlds_{&control, &parameter_server}, collectives_(std::move(collectives)),
        parameter_server_(parameter_server.rank(collectives_.rank())), control_(control.rank(collectives_.rank())) {}

  int rank() const { return control_.rank(); }
  int size() const { return control_.size(); }
  /// This rank's simulated GPU: every buffer given to collectives() lives there.
  sim::device& device() const { return collectives_.device(); }

  communicator& collectives() { return collectives_; }
  loopback::communicator& parameter_server() { return parameter_server_; }
  loopback::communicator& control() { return control_; }

  /// Gives up on the job: this rank's device operations fail, and every rank's host waits
  /// (the control world first: its record names the rank that gave up, see run()).
  void abort() {
    collectives_.abort("the job was aborted");
    for (loopback::world* w : worlds_) w->abort(rank());
  }

 private:
  loopback::world* worlds_[2];  // control first
  communicator collectives_;
  loopback::communicator parameter_server_, control_;
};

/// Runs `body` on `size` threads, one per rank, each with a device of its own made from
/// `options` (each rank's seed differs): `body(communicator&, device&)` with the sim
/// communicator alone, or `body(context&, device&)` with a whole context (a mesh's world).
/// Rethrows the first failure after every thread has finished (a failing rank aborts the
/// others); a rank that gave up on purpose (a deadline) is the cause, whatever failed first.
template <class Body>
void run(int size, device_options options, Body body) {
  auto w = std::make_shared<world>(size);
  loopback::world parameter_server(size), control(size);
  std::vector<std::exception_ptr> failures(static_cast<std::size_t>(size));
  std::mutex first_mutex;
  int first = -1;
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < size; ++r)
      threads.emplace_back([&, r] {
        device_options mine = options;
        mine.seed = options.seed * 1000003u + static_cast<std::uint64_t>(r);
        try {
          device d(mine);
          communicator comm(w, r, d, {mine.timeout});
          if constexpr (std::is_invocable_v<Body&, context&, device&>) {
            context c(std::move(comm), parameter_server, control);
            body(c, d);
          } else {
            body(comm, d);
          }
        } catch (...) {
          failures[static_cast<std::size_t>(r)] = std::current_exception();
          std::lock_guard lock(first_mutex);
          if (first < 0) {
            first = r;
            for (int other = 0; other < size; ++other) w->abort(other);
            control.abort(r);
            parameter_server.abort(r);
          }
        }
      });
    for (std::thread& t : threads) t.join();
  }
  const int gave_up = control.aborted_by();
  const int cause = gave_up >= 0 && failures[static_cast<std::size_t>(gave_up)] ? gave_up : first;
  if (cause >= 0) std::rethrow_exception(failures[static_cast<std::size_t>(cause)]);
}

static_assert(CommContext<context>);

}  // namespace strata::sim

namespace strata {
/// The sim backend's buffers are its simulated GPU's memory, as NCCL's are its GPU's.
template <>
struct buffer_memory<sim::communicator> {
  using type = device_memory;
};
}  // namespace strata
