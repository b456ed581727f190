#pragma once
// Progress within an epoch, for people watching a terminal: one line on rank 0, redrawn in
// place at most five times a second, with the samples done, their rate and the time left.
// When standard output is a file or a pipe (logs, CI) it prints nothing, so a log keeps one
// line per epoch. STRATA_PROGRESS=1 or 0 overrides the terminal check.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace examples {

/// Whether the standard output of process `pid` is a terminal, read from /proc (Linux);
/// false when it cannot be read.
inline bool output_is_a_terminal(pid_t pid) {
  std::error_code error;
  const std::string target = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/fd/1", error).string();
  return !error && (target.starts_with("/dev/pts/") || target.starts_with("/dev/tty"));
}

/// Whether this process should draw progress: rank 0, on a terminal (or STRATA_PROGRESS).
/// OpenMPI hands the ranks it starts a pseudo-terminal of its own whatever mpirun writes to,
/// so under mpirun the terminal that counts is mpirun's: the parent of a rank on its host.
inline bool progress_wanted(int rank) {
  if (rank != 0) return false;
  if (const char* forced = std::getenv("STRATA_PROGRESS")) return std::string_view(forced) == "1";
  if (isatty(STDOUT_FILENO) != 1) return false;
  return std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr || output_is_a_terminal(getppid());
}

class progress_line {
 public:
  /// `total` samples in this epoch; draws nothing unless `enabled`.
  progress_line(bool enabled, int epoch, long total)
      : enabled_(enabled), epoch_(epoch), total_(total), start_(clock::now()), drawn_(start_) {}

  /// `done` samples of the epoch so far (redrawn at most every 0.2 s).
  void update(long done) {
    if (!enabled_) return;
    const auto now = clock::now();
    if (now - drawn_ < std::chrono::milliseconds(200) && done < total_) return;
    drawn_ = now;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0.0;
    const double left = rate > 0 ? static_cast<double>(total_ - done) / rate : 0.0;
    constexpr int width = 30;
    const int filled = total_ > 0 ? static_cast<int>(width * done / total_) : width;
    fmt::print("\repoch {:2d} [{:=<{}}{:<{}}] {}/{} samples  {:.0f} samples/s  ETA {:.0f} s ", epoch_, "", filled, "",
               width - filled, done, total_, rate, left);
    std::fflush(stdout);
  }

  /// Erases the line, before the epoch's summary is printed in its place.
  void clear() {
    if (!enabled_) return;
    fmt::print("\r\033[K");
    std::fflush(stdout);
  }

 private:
  using clock = std::chrono::steady_clock;
  bool enabled_;
  int epoch_;
  long total_;
  clock::time_point start_, drawn_;
};

}  // namespace examples
