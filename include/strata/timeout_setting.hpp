#pragma once
// How long a rank waits for others before it gives up, as the user sets it: one setting,
// STRATA_TIMEOUT_SECONDS, for every wait strata bounds (steps, pipeline messages, mesh groups,
// NCCL's polls). Messages without fmt: nvcc compiles this header too.
#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>

#include "strata/config.hpp"
#include "strata/detail/text.hpp"
#include "strata/error.hpp"

namespace strata {

/// The longest deadline strata accepts: longer ones overflow the clocks' integer ticks, and
/// a wait of more than 11 days is a hang, not a slow rank.
inline constexpr double max_timeout_seconds = 1e6;

/// Throws usage_error unless `seconds` is a deadline strata can keep: positive and at most
/// max_timeout_seconds. `what` names where it came from (a variable, an option).
STRATA_DECL std::chrono::duration<double> checked_timeout(double seconds, std::string_view what);

/// How long a rank may wait for others: STRATA_TIMEOUT_SECONDS if set, else 300 s.
STRATA_DECL std::chrono::duration<double> default_timeout();

}  // namespace strata

#if defined(STRATA_HEADER_ONLY)
#include "strata/impl/timeout_setting.ipp"
#endif
