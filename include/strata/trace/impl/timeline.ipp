#pragma once
// The timeline's non-template code: compiled in every translation unit when strata is
// header-only, once under STRATA_SEPARATE_COMPILATION (see config.hpp).
#include <cerrno>
#include <cstring>
#include <system_error>

#include <nlohmann/json.hpp>

#include "strata/detail/outputs.hpp"
#include "strata/trace/timeline.hpp"

namespace strata::trace {
namespace detail {

inline nlohmann::json metadata(const char* name, int pid, int tid, nlohmann::json args) {
  return {{"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

inline nlohmann::json to_json(const event& e, int pid, int tid, clock::time_point zero) {
  auto us = [](clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); };
  nlohmann::json j = {{"name", e.name}, {"cat", e.category}, {"pid", pid}, {"tid", tid}, {"ts", us(e.begin - zero)}};
  if (e.end > e.begin) {
    j["ph"] = "X";
    j["dur"] = us(e.end - e.begin);
  } else {
    j["ph"] = "i";
    j["s"] = "t";  // an instant on its thread's track
  }
  nlohmann::json args = nlohmann::json::object();
  if (e.bytes > 0) args["bytes"] = e.bytes;
  if (!e.detail.empty()) args["detail"] = e.detail;
  if (!args.empty()) j["args"] = std::move(args);
  return j;
}

}  // namespace detail

STRATA_DECL void timeline::start_from_environment(int rank, int ranks) {
  const std::filesystem::path given = std::getenv("STRATA_TIMELINE"), file = file_of(given, rank);
  try {
    if (!names_folder(given)) require_writable_file(given, "STRATA_TIMELINE");  // a file's name: no device
    require_writable_file(file, "STRATA_TIMELINE");
  } catch (const error& e) {
    if (rank == 0) std::fprintf(stderr, "strata: %s; no timeline is recorded\n", e.what());
    return;
  }
  start(file, rank, ranks);
}

STRATA_DECL std::filesystem::path timeline::file_of(const std::filesystem::path& path, int rank) {
  const std::string suffix = ".rank" + std::to_string(rank) + ".json";
  if (names_folder(path)) return path / ("timeline" + suffix);
  std::filesystem::path file = path;
  const std::string stem = path.extension() == ".json" ? path.stem().string() : path.filename().string();
  return file.replace_filename(stem + suffix);
}

STRATA_DECL std::filesystem::path timeline::write() {
  std::lock_guard lock(mutex_);
  if (!on()) return {};
  on_.store(false, std::memory_order_relaxed);
  nlohmann::json events = nlohmann::json::array();
  events.push_back(detail::metadata("process_name", rank_, 0, {{"name", "rank " + std::to_string(rank_)}}));
  events.push_back(detail::metadata("process_sort_index", rank_, 0, {{"sort_index", rank_}}));
  std::uint64_t dropped = 0;
  for (std::size_t t = 0; t < buffers_.size(); ++t) {
    buffer& b = *buffers_[t];
    std::lock_guard buffer_lock(b.mutex);
    const int tid = static_cast<int>(t);
    events.push_back(detail::metadata("thread_name", rank_, tid,
                                      {{"name", b.name.empty() ? "thread " + std::to_string(t) : b.name}}));
    events.push_back(detail::metadata("thread_sort_index", rank_, tid, {{"sort_index", tid}}));
    for (const event& e : b.events) events.push_back(detail::to_json(e, rank_, tid, zero_));
    dropped += b.dropped;
    b.events.clear();
  }
  const nlohmann::json trace = {{"traceEvents", std::move(events)},
                                {"displayTimeUnit", "ms"},
                                {"otherData", {{"rank", rank_}, {"ranks", ranks_}, {"dropped_events", dropped}}}};
  if (file_.has_parent_path()) {
    std::error_code ignored;  // a folder that cannot be made shows as the file that cannot be written
    std::filesystem::create_directories(file_.parent_path(), ignored);
  }
  // Written beside and renamed into place: a full disk leaves the last whole file (or
  // none), never truncated JSON.
  const std::filesystem::path partial = file_.string() + ".partial";
  std::FILE* out = std::fopen(partial.c_str(), "wb");
  const std::string text = trace.dump() + '\n';
  const bool written = out && std::fwrite(text.data(), 1, text.size(), out) == text.size() && std::fflush(out) == 0;
  const int why = errno;
  if (out && std::fclose(out) != 0 && written) fail(partial, errno);
  if (!written) fail(partial, why);
  std::error_code ec;
  std::filesystem::rename(partial, file_, ec);
  if (ec) fail(partial, ec.value());
  return file_;
}

STRATA_DECL bool timeline::names_folder(const std::filesystem::path& path) {
  std::error_code ec;
  return path.string().ends_with('/') || std::filesystem::is_directory(path, ec);
}

STRATA_DECL void timeline::fail(const std::filesystem::path& partial, int why) {
  std::error_code ignored;
  std::filesystem::remove(partial, ignored);
  throw output_error("STRATA_TIMELINE: cannot write the timeline to \"" + file_.string() + "\" (" + std::strerror(why) +
                     ")");
}

}  // namespace strata::trace
