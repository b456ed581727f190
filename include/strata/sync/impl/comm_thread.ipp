#pragma once
// The communication thread: compiled in every translation unit when strata is header-only, once under
// STRATA_SEPARATE_COMPILATION (see config.hpp).
#include "strata/sync/comm_thread.hpp"

namespace strata::sync {

STRATA_DECL comm_thread::comm_thread() : worker_([this](std::stop_token stop) { run(stop); }) {}

STRATA_DECL comm_thread::~comm_thread() {
  {
    std::lock_guard lock(mutex_);  // the worker checks the stop flag under this lock
    worker_.request_stop();
  }
  wake_.notify_all();
}

STRATA_DECL std::future<void> comm_thread::submit(std::function<void()> job) {
  std::packaged_task<void()> task(std::move(job));
  std::future<void> done = task.get_future();
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(task));
  }
  wake_.notify_one();
  return done;
}

STRATA_DECL void comm_thread::run(std::stop_token stop) {
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

}  // namespace strata::sync
