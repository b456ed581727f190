#pragma once
// Waiting by testing, without burning a core: one schedule for every wait that tests for
// what another rank or thread does (the collectives' chunks, the parameter server's
// requests and replies, a pipeline stage's activations). OpenMPI's blocking calls spin
// without yielding: where threads outnumber cores (ranks sharing cores, server threads, the
// kernel's TCP work) a spinning wait holds the core that the awaited message needs.
#include <algorithm>
#include <chrono>
#include <climits>
#include <thread>

namespace strata {

/// The schedule of a wait made of tests: `tests` back to back, then `yields` that give up the
/// core before each further test, then sleeps that double from `first_sleep` to
/// `longest_sleep`, or only to `busy_sleep` while things keep coming (the last reset under
/// 100 ms ago). Something arriving (backoff::reset) starts the schedule over.
struct pace {
  using microseconds = std::chrono::microseconds;
  int tests = 0;
  int yields = 0;
  microseconds first_sleep{20}, longest_sleep{20}, busy_sleep{20};

  /// A collective's wait for its next chunk: a few hundred tests back to back (tens of
  /// microseconds: a message on shared memory has come by then; yielding from the first test
  /// cost 4 KiB all-reduces half their speed), then the core is given up before each test.
  /// On one machine by a yield: the message comes as soon as its sender runs. Across a
  /// network by a sleep of 20 us: a yield hands the core straight to the next waiting rank
  /// while the kernel's work of moving the bytes waits, and a message over a network takes
  /// tens of microseconds anyway.
  static constexpr pace collective(bool across_network) {
    return across_network ? pace{.tests = 256} : pace{.tests = 256, .yields = INT_MAX};
  }

  /// The parameter server's polls (a server for requests, a worker for replies): a spell of
  /// yields (an answer usually comes within microseconds), then sleeps from 20 us. While
  /// requests keep coming they stop at 100 us, so a message waits at most that long for its
  /// poller: in training requests come every few ms, and 1 ms sleeps there cost the server a
  /// third of its step (sparse_sync at 2 ranks: 9.5 ms a step against 5.8). After a quiet
  /// spell they grow to 1 ms, so a worker held by SSP or an idle server costs ~0% CPU.
  static constexpr pace polling() {
    return {.yields = 200, .longest_sleep = microseconds(1000), .busy_sleep = microseconds(100)};
  }

  /// A barrier's wait: rare, and often for a thread of this very process (a parameter
  /// server's, behind the barrier) that needs the core, so the core is given up from the
  /// first test.
  static constexpr pace rendezvous() { return {.yields = INT_MAX}; }

  /// A wait on the critical path (a pipeline stage's next activation): a message is late by
  /// at most the longest sleep, so it stays at 50 us.
  static constexpr pace critical_path() {
    return {.yields = 200, .longest_sleep = microseconds(50), .busy_sleep = microseconds(50)};
  }
};

/// Paces one wait: pause() after each test that found nothing, reset() when something came.
class backoff {
 public:
  explicit backoff(pace schedule) : pace_(schedule), sleep_(schedule.first_sleep) { note_arrival(); }

  void pause() {
    if (tests_ < pace_.tests) {
      ++tests_;
    } else if (yields_ < pace_.yields) {
      ++yields_;
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(sleep_);
      sleep_ = std::min(sleep_ * 2, busy() ? pace_.busy_sleep : pace_.longest_sleep);
    }
  }
  void reset() {
    tests_ = yields_ = 0;
    sleep_ = pace_.first_sleep;
    note_arrival();
  }

 private:
  static constexpr std::chrono::milliseconds busy_window{100};
  // The clock is read only where busy and quiet sleeps differ: a collective resets per chunk.
  bool tells_busy() const { return pace_.busy_sleep != pace_.longest_sleep; }
  void note_arrival() {
    if (tells_busy()) last_arrival_ = std::chrono::steady_clock::now();
  }
  bool busy() const { return tells_busy() && std::chrono::steady_clock::now() - last_arrival_ < busy_window; }

  pace pace_;
  int tests_ = 0, yields_ = 0;
  std::chrono::microseconds sleep_;
  std::chrono::steady_clock::time_point last_arrival_{};
};

}  // namespace strata
