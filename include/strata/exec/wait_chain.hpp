#pragma once
// Who a deadline should name. A rank whose wait runs out names the rank it waited for; but
// on a mesh that rank may itself be waiting: a pipeline neighbour, or a data replica, of a
// rank whose tensor-parallel partner was stopped is stuck behind the partner, not stopped.
// So a rank that has waited half its deadline tells every rank of the job whom it waits for
// (and, if the wait then ends, that it no longer does), and a rank that gives up follows
// those notices from the rank it blames to the end of the chain: the rank that said nothing,
// which is the stopped (or slowest) one. Notices are sent only by waits that are already
// long, so a job that never stalls sends none.
#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "strata/comm/communicator.hpp"

namespace strata {

/// How a context names a rank of the whole job, and reaches the job's control channel: a
/// mesh's groups know both (group_context); a plain context is the job itself.
template <class Context>
auto& job_control(Context& c) {
  if constexpr (requires { c.job_control(); }) return c.job_control();
  else return c.control();
}
template <class Context>
int job_rank(const Context& c, int rank) {
  if constexpr (requires { c.job_rank(rank); }) return c.job_rank(rank);
  else return rank;
}
template <class Context>
std::string describe_job_rank(const Context& c, int job_rank) {
  if constexpr (requires { c.describe_job_rank(job_rank); }) return c.describe_job_rank(job_rank);
  else return fmt::format("rank {}", job_rank);
}

namespace detail {
inline constexpr int wait_notice_tag = 0x5743;  // "WC"
inline constexpr int not_waiting = -1;
}  // namespace detail

/// One bounded wait of this rank: once half its time is gone, tells every rank of the job
/// whom it waits for; when it ends after that, that it no longer does.
template <Communicator Control>
class wait_notice {
 public:
  wait_notice(Control& job, std::chrono::steady_clock::time_point start, std::chrono::duration<double> timeout)
      : job_(&job), half_(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout / 2)) {}
  wait_notice(const wait_notice&) = delete;
  wait_notice& operator=(const wait_notice&) = delete;
  /// Takes the notice back, unless the wait is being given up (an exception: the deadline
  /// passed), when others may still be following it to the rank at the end.
  ~wait_notice() {
    if (sent_ && std::uncaught_exceptions() == exceptions_) tell(detail::not_waiting);
    for (auto& [value, request] : sends_) job_->wait(request);
  }

  /// Called from the wait's loop: after half the deadline, says (once) that this rank waits
  /// for `job_rank`.
  void waiting_for(int job_rank, std::chrono::steady_clock::time_point now) {
    if (sent_ || now < half_ || job_rank < 0) return;
    sent_ = true;
    tell(job_rank);
  }

 private:
  void tell(int whom) {
    for (int r = 0; r < job_->size(); ++r)
      if (r != job_->rank()) {
        auto& [value, request] = sends_.emplace_back(static_cast<double>(whom), typename Control::request{});
        request = job_->isend(std::span<const double>(&value, 1), r, detail::wait_notice_tag);
      }
  }

  Control* job_;
  std::chrono::steady_clock::time_point half_;
  int exceptions_ = std::uncaught_exceptions();
  bool sent_ = false;
  std::deque<std::pair<double, typename Control::request>> sends_;  // a deque keeps the values in place
};

/// The same for a wait that blocks (the executor's, on its communication thread) instead of
/// polling: a thread of its own that, once an armed wait has lasted half its deadline, asks
/// `whom()` (a job rank, or -1 for nobody known) and says so.
template <Communicator Control>
class wait_watch {
 public:
  explicit wait_watch(Control& job) : job_(&job), thread_([this](std::stop_token stop) { run(stop); }) {}
  wait_watch(const wait_watch&) = delete;
  wait_watch& operator=(const wait_watch&) = delete;
  ~wait_watch() {
    thread_.request_stop();
    thread_.join();  // before the members it uses go
  }

  /// A wait of at most `timeout` begins now; disarm() when it ends.
  void arm(std::chrono::duration<double> timeout, std::function<int()> whom) {
    const std::lock_guard lock(mutex_);
    notice_.emplace(*job_, std::chrono::steady_clock::now(), timeout);
    half_ = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout / 2);
    whom_ = std::move(whom);
    armed_ = true;
    changed_.notify_all();
  }
  /// The wait ended: if it was announced, says that this rank no longer waits (the notice's
  /// destructor, which leaves it standing when the wait is given up).
  void disarm() {
    const std::lock_guard lock(mutex_);
    armed_ = false;
    notice_.reset();
    changed_.notify_all();
  }

  /// Arms for the scope of a wait.
  struct scope {
    scope(wait_watch* w, std::chrono::duration<double> timeout, std::function<int()> whom) : watch(w) {
      if (watch) watch->arm(timeout, std::move(whom));
    }
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;
    ~scope() {
      if (watch) watch->disarm();
    }
    wait_watch* watch;
  };

 private:
  void run(std::stop_token stop) {
    std::unique_lock lock(mutex_);
    while (!stop.stop_requested()) {
      if (!armed_) {
        changed_.wait(lock, stop, [&] { return armed_; });
        continue;
      }
      const auto half = half_;
      if (changed_.wait_until(lock, stop, half, [&] { return !armed_ || half_ != half; })) continue;
      if (armed_ && notice_) notice_->waiting_for(whom_(), std::chrono::steady_clock::now());
      armed_ = false;  // said once; disarm() takes it back
    }
  }

  Control* job_;
  std::mutex mutex_;
  std::condition_variable_any changed_;
  bool armed_ = false;
  std::chrono::steady_clock::time_point half_;
  std::function<int()> whom_;
  std::optional<wait_notice<Control>> notice_;
  std::jthread thread_;  // last: it starts once the members it uses exist
};

/// Follows the notices of the job's ranks: at_end_of(r) is the rank at the end of r's chain
/// of waits (r itself if r said it waits for nobody), and why, for a message.
template <Communicator Control>
class wait_chains {
 public:
  explicit wait_chains(Control& job) : job_(&job) {}

  struct end {
    int rank;             ///< job rank at the end of the chain
    std::vector<int> via;  ///< the waiting ranks on the way, from the blamed one
  };

  end at_end_of(int job_rank) {
    end e{job_rank, {}};
    for (int next; (next = waits_for(e.rank)) != detail::not_waiting;) {
      if (next == job_rank || std::ranges::find(e.via, next) != e.via.end()) break;  // a cycle
      e.via.push_back(e.rank);
      e.rank = next;
    }
    return e;
  }

 private:
  /// The last notice of `rank` (every one is received, so a later call sees the same).
  int waits_for(int rank) {
    if (auto known = last_.find(rank); known != last_.end()) return known->second;
    int whom = detail::not_waiting;
    while (job_->iprobe(rank, detail::wait_notice_tag)) {
      double value = 0;
      auto request = job_->irecv(std::span<double>(&value, 1), rank, detail::wait_notice_tag);
      job_->wait(request);
      whom = static_cast<int>(value);
    }
    return last_[rank] = whom;
  }

  Control* job_;
  std::map<int, int> last_;
};

/// What a deadline says of the ranks of `context` (its own numbering) it waited for, which
/// did not `verb` ("reach this step"), named by the ends of their chains of waits:
/// "rank 0 (dp=0,tp=0,pp=0) did not reach this step; rank 1 (dp=0,tp=1,pp=0) waits for it".
template <class Context>
std::string blamed_ranks(Context& context, std::span<const int> ranks, std::string_view verb) {
  wait_chains chains(job_control(context));
  std::vector<std::pair<int, std::vector<int>>> ends;  // end of a chain, and the waiting ranks on the way
  for (int r : ranks) {
    const auto e = chains.at_end_of(job_rank(context, r));
    auto at = std::ranges::find(ends, e.rank, [](const auto& x) { return x.first; });
    if (at == ends.end()) at = ends.insert(ends.end(), {e.rank, {}});
    for (int w : e.via)
      if (std::ranges::find(at->second, w) == at->second.end()) at->second.push_back(w);
  }
  // The ranks that wait for nobody in one clause, as before chains: "ranks 2, 3 did not reach
  // this step" (a mesh: "rank 2 (dp=…), rank 3 (dp=…) did not …"); then each chain's end.
  std::vector<int> alone;
  for (const auto& [rank, via] : ends)
    if (via.empty()) alone.push_back(rank);
  std::vector<std::string> parts;
  if (!alone.empty()) {
    std::string names;
    if constexpr (requires { context.describe_job_rank(0); }) {
      std::vector<std::string> described;
      for (int r : alone) described.push_back(describe_job_rank(context, r));
      names = fmt::format("{}", fmt::join(described, ", "));
    } else {
      names = fmt::format("rank{} {}", alone.size() > 1 ? "s" : "", fmt::join(alone, ", "));
    }
    parts.push_back(fmt::format("{} did not {}", names, verb));
  }
  for (const auto& [rank, via] : ends) {
    if (via.empty()) continue;
    std::vector<std::string> waiting;
    for (int w : via) waiting.push_back(describe_job_rank(context, w));
    parts.push_back(fmt::format("{} did not {}; {} wait{} for it", describe_job_rank(context, rank), verb,
                                fmt::join(waiting, " and "), via.size() == 1 ? "s" : ""));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace strata
