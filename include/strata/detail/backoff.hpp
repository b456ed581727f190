#pragma once
// Waiting for a message without burning a core: what the parameter server's polls and the
// pipeline driver's deadline-bounded receives share.
#include <algorithm>
#include <chrono>
#include <thread>

namespace strata::detail {

/// Waits between probes: a short spell of yielding (an answer usually comes within
/// microseconds), then sleeps that double from 20 us. While messages keep coming (the last
/// reset(), or the start, under 100 ms ago) the sleeps stop at 100 us, so a message waits at
/// most that long for its poller: in training, requests come every few ms, and 1 ms sleeps
/// there cost the parameter server a third of its step (sparse_sync at 2 ranks: 9.5 ms a
/// step against 5.8). After a quiet spell they grow to `longest`, so a long wait costs ~0% CPU.
class backoff {
 public:
  /// `longest`: the longest sleep. A wait on the critical path (a pipeline stage's next
  /// activation) takes a short one, since a message is late by at most that much.
  explicit backoff(std::chrono::microseconds longest = std::chrono::microseconds(1000)) : longest_(longest) {}

  void pause() {
    if (spins_ < spin_limit) {
      ++spins_;
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(delay_);
    const bool busy = std::chrono::steady_clock::now() - last_reset_ < busy_window;
    delay_ = std::min(delay_ * 2, busy ? std::min(longest_, busy_longest) : longest_);
  }
  void reset() {
    spins_ = 0;
    delay_ = std::chrono::microseconds(20);
    last_reset_ = std::chrono::steady_clock::now();
  }

 private:
  static constexpr int spin_limit = 200;
  static constexpr std::chrono::milliseconds busy_window{100};
  static constexpr std::chrono::microseconds busy_longest{100};
  int spins_ = 0;
  std::chrono::microseconds delay_{20};
  std::chrono::microseconds longest_;
  std::chrono::steady_clock::time_point last_reset_ = std::chrono::steady_clock::now();
};

}  // namespace strata::detail
