#pragma once
// Stochastic gradient descent with momentum, Nesterov momentum and L2 weight decay, with
// PyTorch's semantics (momentum buffer starts at the first gradient, no dampening).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "strata/config.hpp"
#include "strata/optim/hyper_parameters.hpp"
#include "strata/optim/named_state.hpp"

namespace strata::optim {

/// The per-element update, shared by host loops and device kernels.
struct sgd_element {
  float lr, momentum, weight_decay;
  bool nesterov;

  STRATA_HOST_DEVICE void operator()(float& param, float grad, float& velocity) const {
    const float g = grad + weight_decay * param;
    float direction = g;
    if (momentum != 0.0f) {
      velocity = momentum * velocity + g;
      direction = nesterov ? g + momentum * velocity : velocity;
    }
    param -= lr * direction;
  }
};

struct sgd {
  float lr = 0.01f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;

  struct state {
    std::vector<float> velocity;
  };

  state make_state(std::size_t elements) const { return {std::vector<float>(momentum != 0.0f ? elements : 0, 0.0f)}; }

  std::vector<hyper_parameter> hyper_parameters() const {
    return {non_negative("lr", lr), fraction("momentum", momentum, true), non_negative("weight_decay", weight_decay),
            flag("nesterov", nesterov)};
  }

  /// Why state made with `made_with`'s hyper-parameters cannot serve these, or empty: the
  /// velocity exists only where momentum was on at start-up.
  std::string state_refuses(const sgd& made_with) const {
    if (momentum == 0.0f || made_with.momentum != 0.0f) return {};
    return "momentum was turned on, but it was 0 when the executor was made, so no velocity was kept; make the "
           "executor with the momentum on (a schedule may then lower it to 0 and raise it again)";
  }

  /// The state's tensors by name (PyTorch's), for checkpoints.
  static std::vector<named_state> tensors(state& s) {
    if (s.velocity.empty()) return {};
    return {{"momentum_buffer", s.velocity}};
  }

  /// Updates `param`, whose state starts at element `offset` of `s` (the rows of a sparse
  /// update live inside the whole table's state).
  void update(std::span<float> param, std::span<const float> grad, state& s, std::int64_t /*step*/,
              std::size_t offset = 0) const {
    const sgd_element op{lr, momentum, weight_decay, nesterov};
    float unused = 0.0f;
    for (std::size_t i = 0; i < param.size(); ++i)
      op(param[i], grad[i], s.velocity.empty() ? unused : s.velocity[offset + i]);
  }
};

}  // namespace strata::optim
