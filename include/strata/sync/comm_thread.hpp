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
  comm_thread() : worker_([this](std::stop_token stop) { run(stop); }) {}
  comm_thread(const comm_thread&) = delete;
  comm_thread& operator=(const comm_thread&) = delete;
  ~comm_thread() {
    {
      std::lock_guard lock(mutex_);  // the worker checks the stop flag under this lock
      worker_.request_stop();
    }
    wake_.notify_all();
  }

  /// Queues `job`; the future reports its completion or rethrows its exception.
  std::future<void> submit(std::function<void()> job) {
    std::packaged_task<void()> task(std::move(job));
    std::future<void> done = task.get_future();
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back(std::move(task));
    }
    wake_.notify_one();
    return done;
  }

 private:
  void run(std::stop_token stop) {
    trace::name_thread("communication");
    // A finished job is released only once the lock is taken again: its shared state may
    // hold the exception the submitter is still handling, and the lock orders that handling
    // (the submitter's next submit, or the destructor) before the release, which the
    // exception's reference count (inside the C++ runtime) does not show ThreadSanitizer.
    std::packaged_task<void()> job;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return !jobs_.empty() || stop.stop_requested(); });
        if (jobs_.empty()) return;  // stop requested and nothing left to run
        job = std::move(jobs_.front());  // releases the previous job
        jobs_.pop_front();
      }
      job();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<void()>> jobs_;
  std::jthread worker_;  // last: starts after, and joins before, the members it uses
};

}  // namespace strata::sync
