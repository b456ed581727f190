#pragma once
// Exceptions strata throws. Each message names what failed (variable, rank, call) and,
// where it can, what to change.
#include <stdexcept>
#include <string>

namespace strata {

/// Base of strata's run-time errors. (A malformed strategy string throws
/// strategy_parse_error, a std::invalid_argument, like other bad arguments.)
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A variable bound with memory that does not fit its declaration, or a name used twice.
class binding_error : public error {
 public:
  using error::error;
};

/// An executor used out of order: a gradient marked ready twice, a step with gradients
/// missing.
class usage_error : public error {
 public:
  using error::error;
};

/// A gradient became NaN or infinite (named in the message).
class numeric_error : public error {
 public:
  using error::error;
};

/// Ranks stopped making progress: a collective did not finish before the deadline. The
/// message names the ranks that did not arrive.
class timeout_error : public error {
 public:
  using error::error;
};

/// A communication library call failed.
class comm_error : public error {
 public:
  using error::error;
};

/// An output (a file or folder a run writes) cannot be written: no permission, a read-only
/// or full file system. A restart would meet it again (exit status 74).
class output_error : public error {
 public:
  using error::error;
};

/// A CUDA runtime or CUDA library (cuBLAS) call failed; the message names the call, where
/// it was made and the library's description of the failure.
class cuda_error : public error {
 public:
  using error::error;
};

}  // namespace strata
