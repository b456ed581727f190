// A program that knows strata only through its installed package: two loopback ranks train
// one variable and must agree.
#include <cstdio>
#include <vector>

#include <strata/strata.hpp>

int main() {
  using Dense = strata::Strategy<strata::AllReduce<strata::Ring>>;
  float result[2] = {};
  strata::loopback::run(2, [&](strata::loopback::context& ctx) {
    std::vector<float> w(8, 1.0f), g(8, static_cast<float>(ctx.rank()));
    auto m = strata::make_model(strata::variable<Dense>("w", w, g, {8}));
    auto exec = strata::make_executor(ctx, m, strata::optim::sgd{.lr = 1.0f});
    exec.step();
    result[ctx.rank()] = w[0];
  });
  std::printf("consumer: %s -> w[0] = %g on both ranks\n", strata::strategy_name<Dense>().c_str(), result[0]);
  return result[0] == 0.5f && result[1] == 0.5f ? 0 : 1;
}
