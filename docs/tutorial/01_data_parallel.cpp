// Step 1: a data-parallel MLP. Every rank holds the whole model and trains on batches of its
// own; the executor averages the gradients over the ranks, so every rank takes the same update.
//
//   mpirun -np 2 build/docs/tutorial/tutorial_01_data_parallel
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include <strata/strata.hpp>

using namespace strata;

constexpr int inputs = 8, hidden = 32, classes = 3, batch = 32;

// The task: points labelled by a planted linear teacher, so that a model can learn them.
struct teacher {
  std::vector<float> weights = std::vector<float>(classes * inputs);
  explicit teacher(std::mt19937& random) {
    std::normal_distribution<float> normal;
    for (float& w : weights) w = normal(random);
  }
  int label(std::span<const float> x) const {
    std::vector<float> scores(classes, 0.0f);
    for (int c = 0; c < classes; ++c)
      for (int i = 0; i < inputs; ++i) scores[c] += weights[c * inputs + i] * x[i];
    return static_cast<int>(std::max_element(scores.begin(), scores.end()) - scores.begin());
  }
};

// The model, in the user's own memory: strata binds these buffers and never copies them.
struct mlp {
  std::vector<float> w1, b1, w2, b2;           // parameters
  std::vector<float> dw1, db1, dw2, db2;       // their gradients, of the same sizes
  explicit mlp(std::mt19937& random)
      : w1(hidden * inputs), b1(hidden), w2(classes * hidden), b2(classes),
        dw1(w1.size()), db1(b1.size()), dw2(w2.size()), db2(b2.size()) {
    std::normal_distribution<float> normal(0.0f, 0.3f);
    for (float& w : w1) w = normal(random);
    for (float& w : w2) w = normal(random);
  }

  // Forward and backward of one batch under softmax cross-entropy: fills the gradients (the
  // batch's mean) and returns the summed loss and the number of right answers.
  std::pair<double, int> train(std::span<const float> x, std::span<const int> y) {
    for (std::vector<float>* gradient : {&dw1, &db1, &dw2, &db2}) std::ranges::fill(*gradient, 0.0f);
    double loss = 0;
    int right = 0;
    for (int n = 0; n < batch; ++n) {
      const float* in = &x[n * inputs];
      float h[hidden], p[classes];
      for (int j = 0; j < hidden; ++j) {
        float s = b1[j];
        for (int i = 0; i < inputs; ++i) s += w1[j * inputs + i] * in[i];
        h[j] = std::max(s, 0.0f);  // ReLU
      }
      float top = -INFINITY, sum = 0;
      for (int c = 0; c < classes; ++c) {
        p[c] = b2[c];
        for (int j = 0; j < hidden; ++j) p[c] += w2[c * hidden + j] * h[j];
        top = std::max(top, p[c]);
      }
      for (float& v : p) sum += v = std::exp(v - top);
      for (float& v : p) v /= sum;
      loss -= std::log(p[y[n]]);
      right += std::max_element(p, p + classes) - p == y[n];
      // Backward: d(loss)/d(score) = p - one_hot(y), averaged over the batch.
      for (int c = 0; c < classes; ++c) {
        const float d = (p[c] - (c == y[n])) / batch;
        db2[c] += d;
        for (int j = 0; j < hidden; ++j) dw2[c * hidden + j] += d * h[j];
      }
      for (int j = 0; j < hidden; ++j) {
        if (h[j] <= 0) continue;
        float d = 0;
        for (int c = 0; c < classes; ++c) d += (p[c] - (c == y[n])) / batch * w2[c * hidden + j];
        db1[j] += d;
        for (int i = 0; i < inputs; ++i) dw1[j * inputs + i] += d * in[i];
      }
    }
    return {loss, right};
  }
};

// Strategies are types. The weights take the ring all-reduce; the small biases take MPI's own
// all-reduce (Strategy<> is Replicate + AllReduce<Native>).
using Weights = Strategy<Replicate, AllReduce<Ring>>;
using Biases = Strategy<>;

int main(int argc, char** argv) {
  return run_main(argc, argv, [](mpi::context& ctx) {
    std::mt19937 task_random(7);  // the same teacher on every rank
    const teacher truth(task_random);
    std::mt19937 random(100 + ctx.rank());  // but other batches, and even other initial values
    mlp net(random);

    // Declare each variable with its strategy, name and shape; the executor starts every rank
    // from rank 0's values, whatever each rank initialized.
    auto model = make_model(variable<Weights>("w1", net.w1, net.dw1, {hidden, inputs}),
                            variable<Biases>("b1", net.b1, net.db1, {hidden}),
                            variable<Weights>("w2", net.w2, net.dw2, {classes, hidden}),
                            variable<Biases>("b2", net.b2, net.db2, {classes}));
    auto exec = make_executor(ctx, model, optim::adam{.lr = 0.01f});

    std::vector<float> x(batch * inputs);
    std::vector<int> y(batch);
    std::normal_distribution<float> normal;
    double accuracy = 0;
    for (int step = 1; step <= 300; ++step) {
      for (float& v : x) v = normal(random);
      for (int n = 0; n < batch; ++n) y[n] = truth.label(std::span(x).subspan(n * inputs, inputs));
      const auto [loss, right] = net.train(x, y);
      exec.step();  // all-reduce and average the gradients, then Adam: the same update on every rank

      // A logging value summed over the ranks: the control channel's all-reduce.
      double totals[] = {loss, static_cast<double>(right)};
      ctx.control().allreduce_sum(std::span<double>(totals));
      const double samples = static_cast<double>(batch) * ctx.size();
      accuracy = totals[1] / samples;
      if (ctx.rank() == 0 && step % 50 == 0)
        std::printf("update %3lld  loss %.3f  accuracy %.3f\n", static_cast<long long>(exec.updates()),
                    totals[0] / samples, accuracy);
    }
    // Every rank ends with the same parameters: the ranks' checksums of w1 are equal.
    const double mine = std::accumulate(net.w1.begin(), net.w1.end(), 0.0);
    std::vector<double> all(ctx.size());
    ctx.control().allgather(std::span<const double>(&mine, 1), std::span<double>(all));
    const bool alike = std::ranges::all_of(all, [&](double other) { return other == mine; });

    // The planted labels are linear in the inputs: the MLP learns them almost exactly.
    if (ctx.rank() == 0)
      std::printf("trained on %d ranks: accuracy %.3f, parameters %s\n", ctx.size(), accuracy,
                  alike ? "equal on every rank" : "DIFFER across ranks");
    return accuracy >= 0.9 && alike ? 0 : 1;
  });
}
