#pragma once
// Definitions of timeout_setting.hpp's functions (see config.hpp). No fmt: nvcc compiles them too.
#include "strata/timeout_setting.hpp"

namespace strata {

STRATA_DECL std::chrono::duration<double> checked_timeout(double seconds, std::string_view what) {
  if (!(seconds > 0 && seconds <= max_timeout_seconds))
    throw usage_error(detail::cat(what, " is ", detail::shortest(seconds), " seconds; it must be in (0, ",
                                  static_cast<long long>(max_timeout_seconds), "]"));
  return std::chrono::duration<double>(seconds);
}

STRATA_DECL std::chrono::duration<double> default_timeout() {
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
