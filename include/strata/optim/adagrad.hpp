#pragma once
// Adagrad (Duchi et al.) as PyTorch's: a per-element sum of squared gradients scales each
// step. The optimizer of choice for sparse embeddings: rows seen rarely keep large steps.
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "strata/config.hpp"
#include "strata/optim/hyper_parameters.hpp"
#include "strata/optim/named_state.hpp"

namespace strata::optim {

/// The per-element update, shared by host loops and device kernels.
struct adagrad_element {
  float lr, eps, weight_decay;

  STRATA_HOST_DEVICE void operator()(float& param, float grad, float& sum_of_squares) const {
    const float g = grad + weight_decay * param;
    sum_of_squares += g * g;
    param -= lr * g / (std::sqrt(sum_of_squares) + eps);
  }
};

struct adagrad {
  float lr = 0.01f;
  float eps = 1e-10f;
  float weight_decay = 0.0f;
  float initial_accumulator_value = 0.0f;

  struct state {
    std::vector<float> sum;
  };

  state make_state(std::size_t elements) const { return {std::vector<float>(elements, initial_accumulator_value)}; }

  std::vector<hyper_parameter> hyper_parameters() const {
    return {non_negative("lr", lr), positive("eps", eps), non_negative("weight_decay", weight_decay),
            non_negative("initial_accumulator_value", initial_accumulator_value)};
  }

  /// The state's tensors by name (PyTorch's), for checkpoints.
  static std::vector<named_state> tensors(state& s) { return {{"sum", s.sum}}; }

  /// Updates `param`, whose state starts at element `offset` of `s`.
  void update(std::span<float> param, std::span<const float> grad, state& s, std::int64_t /*step*/,
              std::size_t offset = 0) const {
    const adagrad_element op{lr, eps, weight_decay};
    for (std::size_t i = 0; i < param.size(); ++i) op(param[i], grad[i], s.sum[offset + i]);
  }
};

}  // namespace strata::optim
