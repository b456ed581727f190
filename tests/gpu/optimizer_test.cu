// Fused optimizer kernels against the host optimizers over several steps. They agree to
// rounding, not bit for bit: nvcc contracts a * b + c into one FMA, the host compiler
// (without -march) does not. A grad_scale other than 1 must equal the host update of the
// scaled gradient.
#include <cmath>
#include <string>
#include <vector>

#include "gpu_test.hpp"
#include "strata/cuda/optimizer.cuh"

namespace gpu_test {

namespace {

constexpr std::size_t elements = (1u << 18) + 3;
constexpr float tolerance = 1e-5f;

std::vector<float> wave(float phase) {
  std::vector<float> v(elements);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.001f * static_cast<float>(i) + phase);
  return v;
}

std::vector<float> scaled(std::vector<float> v, float scale) {
  for (float& x : v) x *= scale;
  return v;
}

void check_sgd(const strata::optim::sgd& opt, const std::string& what, float grad_scale = 1.0f) {
  std::vector<float> param = wave(0.5f);
  auto state = opt.make_state(elements);
  auto device_param = to_device(param), device_velocity = to_device(state.velocity);
  for (int step = 1; step <= 3; ++step) {
    const std::vector<float> grad = wave(static_cast<float>(step));
    const auto device_grad = to_device(grad);
    strata::cuda::sgd_update(device_param.span(), device_grad.span(), device_velocity.span(),
                             {opt.lr, opt.momentum, opt.weight_decay, opt.nesterov}, nullptr, grad_scale);
    opt.update(param, scaled(grad, grad_scale), state, step);
  }
  expect_near(to_host(device_param), param, tolerance, what + ": parameters");
  expect_near(to_host(device_velocity), state.velocity, tolerance, what + ": velocity");
}

void check_adam(float grad_scale = 1.0f) {
  const std::string what = "adam, gradient scaled by " + std::to_string(grad_scale);
  const strata::optim::adam opt{.lr = 1e-2f, .weight_decay = 1e-3f};
  std::vector<float> param = wave(0.5f);
  auto state = opt.make_state(elements);
  auto device_param = to_device(param), device_m = to_device(state.m), device_v = to_device(state.v);
  for (int step = 1; step <= 3; ++step) {
    const std::vector<float> grad = wave(static_cast<float>(step));
    const auto device_grad = to_device(grad);
    strata::cuda::adam_update(device_param.span(), device_grad.span(), device_m.span(), device_v.span(), opt.element(step),
                              nullptr, grad_scale);
    opt.update(param, scaled(grad, grad_scale), state, step);
  }
  expect_near(to_host(device_param), param, tolerance, what + ": parameters");
  expect_near(to_host(device_m), state.m, tolerance, what + ": first moment");
  expect_near(to_host(device_v), state.v, tolerance, what + ": second moment");
}

}  // namespace

void optimizer() {
  check_sgd({.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-2f}, "sgd with momentum");
  check_sgd({.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-2f, .nesterov = true}, "sgd with Nesterov momentum");
  check_sgd({.lr = 0.05f}, "plain sgd");
  check_sgd({.lr = 0.05f, .momentum = 0.9f}, "sgd with momentum, gradient scaled by 1/4", 0.25f);
  check_adam();
  check_adam(0.25f);
}

}  // namespace gpu_test
