#pragma once
// Giving up at a deadline: one rule for every wait strata bounds (the executor's steps, the
// pipeline driver's messages, mesh groups). The deadline itself, STRATA_TIMEOUT_SECONDS, is
// timeout_setting.hpp's.
#include <cstdio>
#include <string>

#include "strata/error.hpp"
#include "strata/timeout_setting.hpp"
#include "strata/trace/timeline.hpp"

namespace strata {

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
