#pragma once
// An optimizer's hyper-parameters as data: each with its allowed range, so that one piece of
// code checks them (a NaN or negative learning rate is refused before it reaches the model)
// and puts them in the start-up signature (replicas that update with different settings
// would silently drift apart).
#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "strata/config.hpp"

namespace strata::optim {

struct hyper_parameter {
  std::string name;
  float value;              ///< optimizers keep float hyper-parameters: printed as floats, "0.1" not "0.10000000149"
  double low, high;         ///< allowed range; high may be infinity (any finite value)
  bool low_open = false;    ///< the range excludes `low`
  bool high_open = false;   ///< the range excludes `high`

  bool allowed() const {
    return std::isfinite(value) && (low_open ? value > low : value >= low) && (high_open ? value < high : value <= high);
  }
  /// The value, shortest that reads back exactly: "0.1", "1e-08".
  STRATA_DECL std::string value_text() const;
  /// The range as "[0, 1)" or "(0, inf)".
  STRATA_DECL std::string range() const;
};

/// A hyper-parameter in [0, inf): learning rates, weight decay, accumulator starts.
inline hyper_parameter non_negative(std::string name, float value) {
  return {std::move(name), value, 0.0, INFINITY, false, true};
}
/// A hyper-parameter in (0, inf): epsilons.
inline hyper_parameter positive(std::string name, float value) { return {std::move(name), value, 0.0, INFINITY, true, true}; }
/// A decay rate in [0, 1) (Adam's betas), or [0, 1] with `closed`: momentum.
inline hyper_parameter fraction(std::string name, float value, bool closed = false) {
  return {std::move(name), value, 0.0, 1.0, false, !closed};
}
/// A switch, as 0 or 1.
inline hyper_parameter flag(std::string name, bool value) { return {std::move(name), value ? 1.0f : 0.0f, 0.0, 1.0}; }

}  // namespace strata::optim

#if defined(STRATA_HEADER_ONLY)
#include "strata/optim/impl/hyper_parameters.ipp"
#endif
