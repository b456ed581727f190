#pragma once
// How long a rank waits for others before it gives up, as the user sets it: one setting,
// STRATA_TIMEOUT_SECONDS, for every wait strata bounds (steps, pipeline messages, mesh groups,
// NCCL's polls). Messages without fmt: nvcc compiles this header too.
#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>

#include "strata/detail/text.hpp"
#include "strata/error.hpp"

namespace strata {

/// The longest deadline strata accepts: longer ones overflow the clocks' integer ticks, and
/// a wait of more than 11 days is a hang, not a slow rank.
inline constexpr double max_timeout_seconds = 1e6;

/// Throws usage_error unless `seconds` is a deadline strata can keep: positive and at most
/// max_timeout_seconds. `what` names where it came from (a variable, an option).
inline std::chrono::duration<double> checked_timeout(double seconds, std::string_view what) {
  if (!(seconds > 0 && seconds <= max_timeout_seconds))
    throw usage_error(detail::cat(what, " is ", detail::shortest(seconds), " seconds; it must be in (0, ",
                                  static_cast<long long>(max_timeout_seconds), "]"));
  return std::chrono::duration<double>(seconds);
}

/// How long a rank may wait for others: STRATA_TIMEOUT_SECONDS if set, else 300 s.
inline std::chrono::duration<double> default_timeout() {
  if (const char* text = std::getenv("STRATA_TIMEOUT_SECONDS")) {
    const std::string quoted = detail::cat("STRATA_TIMEOUT_SECONDS=\"", detail::excerpt(text), "\"");
    char* end = nullptr;
    const double seconds = std::strtod(text, &end);
    if (end == text || *end != '\0')
      throw usage_error(detail::cat(quoted, " is not a number of seconds in (0, ",
                                    static_cast<long long>(max_timeout_seconds), "]"));
    return checked_timeout(seconds, quoted);
  }
  return std::chrono::duration<double>(300.0);
}

}  // namespace strata
