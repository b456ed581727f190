#pragma once
// Adam (Kingma & Ba) with bias correction and optional L2 weight decay, as PyTorch's Adam.
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "strata/config.hpp"
#include "strata/optim/hyper_parameters.hpp"
#include "strata/optim/named_state.hpp"

namespace strata::optim {

/// The per-element update, shared by host loops and device kernels. `step_size` and
/// `bias2_sqrt` fold the bias corrections, computed once per step.
struct adam_element {
  float step_size, beta1, beta2, eps, weight_decay, bias2_sqrt;

  STRATA_HOST_DEVICE void operator()(float& param, float grad, float& m, float& v) const {
    const float g = grad + weight_decay * param;
    m = beta1 * m + (1.0f - beta1) * g;
    v = beta2 * v + (1.0f - beta2) * g * g;
    param -= step_size * m / (std::sqrt(v) / bias2_sqrt + eps);
  }
};

struct adam {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;

  struct state {
    std::vector<float> m, v;
  };

  state make_state(std::size_t elements) const { return {std::vector<float>(elements, 0.0f), std::vector<float>(elements, 0.0f)}; }

  std::vector<hyper_parameter> hyper_parameters() const {
    return {non_negative("lr", lr), fraction("beta1", beta1), fraction("beta2", beta2), positive("eps", eps),
            non_negative("weight_decay", weight_decay)};
  }

  /// The state's tensors by name (PyTorch's), for checkpoints.
  static std::vector<named_state> tensors(state& s) { return {{"exp_avg", s.m}, {"exp_avg_sq", s.v}}; }

  /// `step` counts updates from 1.
  adam_element element(std::int64_t step) const {
    const double bias1 = 1.0 - std::pow(double(beta1), double(step));
    const double bias2 = 1.0 - std::pow(double(beta2), double(step));
    return {static_cast<float>(lr / bias1), beta1, beta2, eps, weight_decay, static_cast<float>(std::sqrt(bias2))};
  }

  /// Updates `param`, whose state starts at element `offset` of `s` (the rows of a sparse
  /// update live inside the whole table's state: "lazy" Adam, untouched rows keep theirs).
  void update(std::span<float> param, std::span<const float> grad, state& s, std::int64_t step,
              std::size_t offset = 0) const {
    const adam_element op = element(step);
    for (std::size_t i = 0; i < param.size(); ++i) op(param[i], grad[i], s.m[offset + i], s.v[offset + i]);
  }
};

}  // namespace strata::optim
