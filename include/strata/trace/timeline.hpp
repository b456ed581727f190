#pragma once
// The timeline: with STRATA_TIMELINE=path set, every rank records where its time goes (steps,
// each bucket's collective and its bytes, parameter-server pushes, pulls, parked pulls and
// applications, optimizer updates, waits and what they wait for, checkpoint writes) and
// writes it as a Chrome trace (the JSON trace-event format that Perfetto and chrome://tracing
// open), one file per rank: path "run.json" gives run.rank0.json, run.rank1.json, ...
// scripts/timeline.py merges them and draws a Gantt chart.
//
// Off, an event costs one relaxed atomic load. On, each thread appends to its own buffer
// (a lock no other thread takes until the file is written), at most max_events per thread;
// later events are counted as dropped, so a long run's memory stays bounded.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "strata/config.hpp"
#include "strata/error.hpp"

namespace strata::trace {

using clock = std::chrono::steady_clock;

/// One event: a span (end > begin) or an instant (end == begin).
struct event {
  const char* name;      ///< what happened: "all-reduce", "push", "wait", ... (a literal)
  const char* category;  ///< "step", "collective", "ps", "optimizer", "wait", "checkpoint"
  clock::time_point begin, end;
  std::uint64_t bytes = 0;  ///< bytes moved, where the event moves any
  std::string detail;       ///< which bucket, variable, shard, or what a wait waits for
};

/// The process's timeline: one per process (one MPI rank).
class timeline {
 public:
  static constexpr std::size_t max_events = std::size_t{1} << 20;  ///< per thread

  static timeline& instance() {
    static timeline t;
    return t;
  }

  bool on() const noexcept { return on_.load(std::memory_order_relaxed); }

  /// Starts recording for `rank` of `ranks`, writing to `file` (see file_of). Time 0 is now:
  /// call it right after a barrier so that the ranks' tracks line up.
  void start(std::filesystem::path file, int rank, int ranks) {
    std::lock_guard lock(mutex_);
    file_ = std::move(file);
    rank_ = rank;
    ranks_ = ranks;
    zero_ = clock::now();
    on_.store(true, std::memory_order_relaxed);
  }

  /// Pauses (false) or resumes (true) recording after start(), keeping what was recorded:
  /// to measure what recording costs, or to trace only part of a run.
  void set_recording(bool on) {
    std::lock_guard lock(mutex_);
    if (!file_.empty()) on_.store(on, std::memory_order_relaxed);
  }

  /// Whether STRATA_TIMELINE asks for a timeline that is not being recorded yet.
  static bool requested() {
    const char* path = std::getenv("STRATA_TIMELINE");
    return path != nullptr && *path != '\0' && !instance().on();
  }

  /// Starts recording for `rank` of `ranks` into STRATA_TIMELINE's file for the rank (a
  /// backend's context calls it once every rank is up, right after a barrier).
  /// A file that cannot be written (a device, a folder without permission) is said at once,
  /// by rank 0, and nothing is recorded: the timeline explains a run, it does not stop one.
  STRATA_DECL void start_from_environment(int rank, int ranks);

  /// The file of `rank` for STRATA_TIMELINE=`path`: "t.json" -> "t.rank3.json", "t" -> "t.rank3.json",
  /// and a folder ("out/", or one that exists) -> "out/timeline.rank3.json".
  STRATA_DECL static std::filesystem::path file_of(const std::filesystem::path& path, int rank);

  /// Names the calling thread's track ("training", "communication", "parameter server").
  void name_thread(std::string name) {
    if (!on()) return;
    buffer& b = mine();
    std::lock_guard lock(b.mutex);
    b.name = std::move(name);
  }

  void record(event e) {
    buffer& b = mine();
    std::lock_guard lock(b.mutex);
    if (b.events.size() < max_events) b.events.push_back(std::move(e));
    else ++b.dropped;
  }

  /// Writes this rank's trace (all threads' events so far) and returns its file; stops
  /// recording. Written again by a later call with what came since start. Throws
  /// output_error when the file cannot be written.
  STRATA_DECL std::filesystem::path write();

 private:
  /// "out/", or a folder that exists: the timeline's files go inside.
  STRATA_DECL static bool names_folder(const std::filesystem::path& path);

  /// A write that failed: nothing of it is left, and the reason is said.
  [[noreturn]] STRATA_DECL void fail(const std::filesystem::path& partial, int why);

  struct buffer {
    std::mutex mutex;  // taken by its thread per event, and by write()
    std::string name;
    std::vector<event> events;
    std::uint64_t dropped = 0;
  };

  buffer& mine() {
    thread_local buffer* b = nullptr;  // buffers live as long as the process: threads may end first
    if (b == nullptr) {
      std::lock_guard lock(mutex_);
      b = buffers_.emplace_back(std::make_unique<buffer>()).get();
    }
    return *b;
  }





  std::atomic<bool> on_{false};
  std::mutex mutex_;  // buffers_ and the settings
  std::vector<std::unique_ptr<buffer>> buffers_;
  std::filesystem::path file_;
  int rank_ = 0, ranks_ = 1;
  clock::time_point zero_;
};

inline bool on() noexcept { return timeline::instance().on(); }

/// Records a span from construction to destruction, when the timeline is on. The detail is
/// made only then: pass a callable returning it to keep formatting off the path when off.
class span {
 public:
  span(const char* name, const char* category, std::uint64_t bytes = 0) {
    if (on()) e_.emplace(event{name, category, clock::now(), {}, bytes, {}});
  }
  template <class Detail>
    requires std::is_invocable_r_v<std::string, Detail>
  span(const char* name, const char* category, std::uint64_t bytes, Detail&& detail) : span(name, category, bytes) {
    if (e_) e_->detail = detail();
  }
  span(const span&) = delete;
  span& operator=(const span&) = delete;
  ~span() {
    if (!e_) return;
    e_->end = clock::now();
    if (e_->end == e_->begin) e_->end += clock::duration(1);  // a span, however short
    timeline::instance().record(std::move(*e_));
  }
  /// The bytes moved, once known.
  void add_bytes(std::uint64_t bytes) {
    if (e_) e_->bytes += bytes;
  }

 private:
  std::optional<event> e_;
};

/// Records an instant: a bucket launched, a pull parked.
template <class Detail>
void instant(const char* name, const char* category, Detail&& detail) {
  if (!on()) return;
  const auto now = clock::now();
  timeline::instance().record({name, category, now, now, 0, detail()});
}

inline void name_thread(std::string name) { timeline::instance().name_thread(std::move(name)); }

/// Writes the timeline if it is on; a failure is said on standard error, not thrown (for
/// destructors and a job that is ending anyway).
inline void write_or_warn() noexcept {
  try {
    if (on()) timeline::instance().write();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata: %s\n", e.what());
  }
}

}  // namespace strata::trace

#if defined(STRATA_HEADER_ONLY)
#include "strata/trace/impl/timeline.ipp"
#endif
