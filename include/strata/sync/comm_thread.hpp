#pragma once
// One background thread that runs communication jobs in submission order. Collectives
// must be issued in the same order on every rank; a single FIFO thread guarantees that,
// and lets them proceed while the training thread computes the rest of backward.
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "strata/trace/timeline.hpp"

namespace strata::sync {

class comm_thread {
 public:
  STRATA_DECL comm_thread();
  comm_thread(const comm_thread&) = delete;
  comm_thread& operator=(const comm_thread&) = delete;
  /// Runs the jobs already queued, then joins.
  STRATA_DECL ~comm_thread();

  /// Queues `job`; the future reports its completion or rethrows its exception.
  STRATA_DECL std::future<void> submit(std::function<void()> job);

 private:
  STRATA_DECL void run(std::stop_token stop);

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<void()>> jobs_;
  std::jthread worker_;  // last: starts after, and joins before, the members it uses
};

}  // namespace strata::sync

#if defined(STRATA_HEADER_ONLY)
#include "strata/sync/impl/comm_thread.ipp"
#endif
