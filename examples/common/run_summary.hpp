#pragma once
// The end of a training example, shared: rank 0 writes the final parameters where
// --save-params asked (raw float32, what compare_params reads) and prints the one summary
// line the benchmarks and tests parse; the exit status says whether --min-accuracy was met.
#include <fstream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace examples {

struct run_summary {
  int ranks = 0;
  std::string strategy;
  int epochs = 0;
  long steps = 0;
  double test_accuracy = 0.0;
  double seconds_per_epoch = 0.0;
  double sync_seconds = 0.0;
  double wait_seconds = 0.0;
};

/// Writes `tensors` one after another as raw float32 (nothing when `path` is empty).
inline void save_params(const std::string& path, const std::vector<std::span<const float>>& tensors) {
  if (path.empty()) return;
  std::ofstream out(path, std::ios::binary);
  for (const auto& t : tensors)
    out.write(reinterpret_cast<const char*>(t.data()), static_cast<std::streamsize>(t.size_bytes()));
  if (!out) throw std::runtime_error(fmt::format("could not write {}", path));
}

/// Prints the summary on rank 0; returns the exit status (1 below `min_accuracy`).
inline int finish_run(int rank, const run_summary& s, double min_accuracy) {
  if (rank == 0)
    fmt::print("summary: ranks={} strategy={} epochs={} steps={} test_accuracy={:.4f} seconds_per_epoch={:.3f} "
               "sync_seconds={:.3f} wait_seconds={:.3f}\n",
               s.ranks, s.strategy, s.epochs, s.steps, s.test_accuracy, s.seconds_per_epoch, s.sync_seconds,
               s.wait_seconds);
  if (s.test_accuracy >= min_accuracy) return 0;
  if (rank == 0) fmt::print(stderr, "test accuracy {:.4f} is below --min-accuracy {:.4f}\n", s.test_accuracy, min_accuracy);
  return 1;
}

}  // namespace examples
