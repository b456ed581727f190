// The README's example: a tiny linear regression trained data-parallel on every rank.
//
//   mpirun -np 2 ./quickstart
#include <cmath>
#include <cstdio>
#include <vector>

#include <strata/strata.hpp>

using namespace strata;

// Strategies are types: policies in any order, checked when the type is formed.
using Dense = Strategy<Replicate, AllReduce<Ring>>;
using Small = Strategy<>;  // Replicate + AllReduce<Native>: MPI's own all-reduce

int main(int argc, char** argv) {
  mpi::context ctx(argc, argv);

  // The user's own memory: y = w . x + b, fitted to y = 2 x0 - 3 x1 + 1.
  std::vector<float> w(2, 0.0f), grad_w(2), b(1, 0.0f), grad_b(1);
  auto model = make_model(variable<Dense>("w", w, grad_w, {2}),   // shape is checked against the buffers
                          variable<Small>("b", b, grad_b, {1}));
  auto exec = make_executor(ctx, model, optim::sgd{.lr = 0.2f, .momentum = 0.5f});

  for (int step = 0; step < 500; ++step) {
    // Each rank sees its own sample; the executor averages the gradients over ranks.
    const float x0 = static_cast<float>((step * 7 + ctx.rank() * 3) % 11) / 11.0f;
    const float x1 = static_cast<float>((step * 5 + ctx.rank() * 2) % 13) / 13.0f;
    const float error = w[0] * x0 + w[1] * x1 + b[0] - (2 * x0 - 3 * x1 + 1);
    grad_w = {error * x0, error * x1};
    grad_b = {error};
    exec.step();  // all-reduce, average, SGD update: every rank ends with the same parameters
  }
  if (ctx.rank() == 0)
    std::printf("%s w = (%.3f, %.3f), b = %.3f after %lld updates\n", strategy_name<Dense>().c_str(), w[0], w[1], b[0],
                static_cast<long long>(exec.updates()));
  const bool fitted = std::abs(w[0] - 2) < 0.05f && std::abs(w[1] + 3) < 0.05f && std::abs(b[0] - 1) < 0.05f;
  return fitted ? 0 : 1;
}
