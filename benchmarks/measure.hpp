#pragma once
// Shared by the benchmarks (CPU and GPU): interleaved timing and medians.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <span>
#include <functional>
#include <string>
#include <vector>

#include "strata/optim/named_state.hpp"

namespace bench {

/// An optimizer that leaves parameters untouched, so a benchmark times synchronization only.
struct no_update {
  struct state {};
  state make_state(std::size_t) const { return {}; }
  void update(std::span<float>, std::span<const float>, state&, std::int64_t, std::size_t = 0) const {}
  static std::vector<strata::optim::named_state> tensors(state&) { return {}; }
};

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

/// A contender: a name and one call of the operation being measured.
struct contender {
  std::string name;
  std::function<void()> run;
  std::vector<double> seconds;  // per round, per call
};

/// Runs the contenders in turn, `rounds` times (A B C A B C ...), each round timing `calls`
/// back-to-back calls between two calls of `fence`, which waits until all work is done (an
/// MPI barrier, a GPU stream's synchronization); records this process's seconds per call.
/// Interleaving spreads machine noise evenly over all contenders.
template <class Fence>
void interleave(std::vector<contender>& contenders, int rounds, int calls, Fence&& fence) {
  for (auto& c : contenders) c.run();  // warm-up: page faults, lazy connection setup
  for (int round = 0; round < rounds; ++round)
    for (auto& c : contenders) {
      fence();
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i) c.run();
      fence();
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      c.seconds.push_back(took.count() / calls);
    }
}

}  // namespace bench
