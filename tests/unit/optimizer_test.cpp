// Optimizer math against plain reference implementations (PyTorch's update rules written
// out in double precision).
#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "strata/optim/optimizer.hpp"

using namespace strata;

namespace {
std::vector<float> gradient_at(int step) {
  std::vector<float> g(17);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = std::sin(0.3f * static_cast<float>(i) + static_cast<float>(step));
  return g;
}
std::vector<float> start_values() {
  std::vector<float> p(17);
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = 0.1f * static_cast<float>(i) - 0.5f;
  return p;
}
}  // namespace

TEST_CASE("SGD with momentum, Nesterov and weight decay matches the reference", "[optim]") {
  for (bool nesterov : {false, true}) {
    const optim::sgd opt{.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-2f, .nesterov = nesterov};
    std::vector<float> p = start_values();
    auto state = opt.make_state(p.size());
    std::vector<double> ref(p.begin(), p.end()), buf(p.size(), 0.0);
    for (int step = 1; step <= 5; ++step) {
      const auto g = gradient_at(step);
      opt.update(p, g, state, step);
      for (std::size_t i = 0; i < ref.size(); ++i) {
        const double d = g[i] + 1e-2 * ref[i];
        buf[i] = step == 1 ? d : 0.9 * buf[i] + d;
        ref[i] -= 0.05 * (nesterov ? d + 0.9 * buf[i] : buf[i]);
      }
    }
    for (std::size_t i = 0; i < p.size(); ++i) CHECK(p[i] == Approx(ref[i]).epsilon(1e-5));
  }
}

TEST_CASE("plain SGD keeps no state", "[optim]") {
  const optim::sgd opt{.lr = 0.1f};
  CHECK(opt.make_state(100).velocity.empty());
  std::vector<float> p = {1.0f, 2.0f};
  const std::vector<float> g = {0.5f, -1.0f};
  auto state = opt.make_state(2);
  opt.update(p, g, state, 1);
  CHECK(p == std::vector<float>{0.95f, 2.1f});
}

TEST_CASE("Adam with bias correction matches the reference", "[optim]") {
  const optim::adam opt{.lr = 1e-2f, .weight_decay = 1e-3f};
  std::vector<float> p = start_values();
  auto state = opt.make_state(p.size());
  std::vector<double> ref(p.begin(), p.end()), m(p.size(), 0.0), v(p.size(), 0.0);
  for (int step = 1; step <= 7; ++step) {
    const auto g = gradient_at(step);
    opt.update(p, g, state, step);
    for (std::size_t i = 0; i < ref.size(); ++i) {
      const double d = g[i] + 1e-3 * ref[i];
      m[i] = 0.9 * m[i] + 0.1 * d;
      v[i] = 0.999 * v[i] + 0.001 * d * d;
      const double mhat = m[i] / (1 - std::pow(0.9, step)), vhat = v[i] / (1 - std::pow(0.999, step));
      ref[i] -= 1e-2 * mhat / (std::sqrt(vhat) + 1e-8);
    }
  }
  for (std::size_t i = 0; i < p.size(); ++i) CHECK(p[i] == Approx(ref[i]).epsilon(1e-5).margin(1e-6));
}
