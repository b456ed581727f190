#pragma once
// Waiting for a message without burning a core: what the parameter server's polls and the
// pipeline driver's deadline-bounded receives share.
#include <algorithm>
#include <chrono>
#include <thread>

namespace strata::detail {

/// Waits between probes: a short spell of yielding (an answer usually comes within
/// microseconds), then sleeps that double from 20 us to 1 ms, so a long wait costs ~0% CPU.
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
    delay_ = std::min(delay_ * 2, longest_);
  }
  void reset() {
    spins_ = 0;
    delay_ = std::chrono::microseconds(20);
  }

 private:
  static constexpr int spin_limit = 200;
  int spins_ = 0;
  std::chrono::microseconds delay_{20};
  std::chrono::microseconds longest_;
};

}  // namespace strata::detail
