#pragma once
// Exit statuses for training programs, so that a launcher can tell a failure worth a restart
// (a rank died, a deadline fired) from one that a restart would only repeat (a bad flag, a
// diverged model, a full disk). The numbers are BSD's sysexits.h, which launchers and shells
// already know; strata-launch restarts on every other non-zero status.
#include <exception>
#include <stdexcept>

#include "strata/ckpt/format.hpp"
#include "strata/error.hpp"
#include "strata/exec/signature_check.hpp"

namespace strata {

enum exit_status : int {
  exit_success = 0,
  exit_failure = 1,        ///< worth a restart: a rank died or stalled, communication failed
  exit_usage = 64,         ///< the command line, the options or the model declaration is wrong
  exit_data = 65,          ///< the model diverged (NaN/Inf), or no checkpoint is usable
  exit_cannot_write = 74,  ///< an output or checkpoint cannot be written (disk full, read-only, no permission)
};

/// The exit status for a program that ends with exception `e`.
inline exit_status exit_status_of(const std::exception& e) {
  if (dynamic_cast<const ckpt::checkpoint_write_error*>(&e) || dynamic_cast<const output_error*>(&e))
    return exit_cannot_write;
  if (dynamic_cast<const ckpt::checkpoint_error*>(&e) || dynamic_cast<const numeric_error*>(&e)) return exit_data;
  if (dynamic_cast<const usage_error*>(&e) || dynamic_cast<const binding_error*>(&e) ||
      dynamic_cast<const signature_error*>(&e) || dynamic_cast<const std::invalid_argument*>(&e))
    return exit_usage;
  return exit_failure;
}

}  // namespace strata
