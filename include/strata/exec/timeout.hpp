#pragma once
// How long a rank waits for others before it gives up: one rule for every wait strata
// bounds (the executor's steps, the pipeline driver's messages), and one setting,
// STRATA_TIMEOUT_SECONDS.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "strata/detail/text.hpp"
#include "strata/error.hpp"
#include "strata/trace/timeline.hpp"

namespace strata {

/// The longest deadline strata accepts: longer ones overflow the clocks' integer ticks, and
/// a wait of more than 11 days is a hang, not a slow rank.
inline constexpr double max_timeout_seconds = 1e6;

/// Throws usage_error unless `seconds` is a deadline strata can keep: positive and at most
/// max_timeout_seconds. `what` names where it came from (a variable, an option).
inline std::chrono::duration<double> checked_timeout(double seconds, std::string_view what) {
  if (!(seconds > 0 && seconds <= max_timeout_seconds))
    throw usage_error(fmt::format("{} is {} seconds; it must be in (0, {:.0f}]", what, seconds, max_timeout_seconds));
  return std::chrono::duration<double>(seconds);
}

/// How long a step may wait for other ranks: STRATA_TIMEOUT_SECONDS if set, else 300 s.
inline std::chrono::duration<double> default_timeout() {
  if (const char* text = std::getenv("STRATA_TIMEOUT_SECONDS")) {
    char* end = nullptr;
    const double seconds = std::strtod(text, &end);
    if (end == text || *end != '\0')
      throw usage_error(fmt::format("STRATA_TIMEOUT_SECONDS=\"{}\" is not a number of seconds in (0, {:.0f}]",
                                    detail::excerpt(text), max_timeout_seconds));
    return checked_timeout(seconds, fmt::format("STRATA_TIMEOUT_SECONDS=\"{}\"", detail::excerpt(text)));
  }
  return std::chrono::duration<double>(300.0);
}

/// Gives up after a deadline: says `message` on standard error (where a launcher's log
/// keeps it), ends the job through `context` so that no rank is left waiting (with MPI,
/// mpirun exits non-zero), and throws timeout_error for a context whose abort returns.
template <class Context>
[[noreturn]] void abort_after_deadline(Context& context, const std::string& message) {
  std::fputs((message + "\n").c_str(), stderr);
  std::fflush(stderr);
  trace::write_or_warn();  // the timeline up to the stall: what each rank was waiting for
  context.abort();
  throw timeout_error(message);
}

}  // namespace strata
