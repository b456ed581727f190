// Step 3: a parameter server for an embedding. A table of 4096 rows of 8 lives on two
// parameter-server shards; each batch pulls the rows it reads and pushes the gradient of those
// rows only. The small dense head is all-reduced, as in step 1.
//
//   mpirun -np 2 build/docs/tutorial/tutorial_03_parameter_server
#include <algorithm>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include <fmt/format.h>

#include <strata/strata.hpp>

using namespace strata;

// The table, split by rows over two server shards; only the rows a batch touches travel.
using Embedding = Strategy<PS<2>, Partition<0>, SparseRows>;
// The head, 9 floats: replicated and all-reduced by MPI's own all-reduce.
using Head = Strategy<>;

// A batch of 64 samples of 4 ids reads at most 256 of the 4096 rows: its gradient is sparse.
constexpr std::size_t rows = 4096, dim = 8, fields = 4, batch = 64;  // batch: per rank
constexpr int updates = 500, report_every = 100;
constexpr double target_loss = 1e-3;  // the mean of 0.5 (prediction - target)^2 starts near 2

// The student: a sample's prediction is b + the sum over its ids of embedding[id] . w.
struct student {
  std::vector<float> table = std::vector<float>(rows * dim);  // a worker's cache of the servers' rows
  std::vector<float> w = std::vector<float>(dim), grad_w = std::vector<float>(dim);
  std::vector<float> b = {0.0f}, grad_b = {0.0f};
  std::vector<float> row_grads = std::vector<float>(batch * fields * dim);  // one row per id read, in order

  // Overwrites every gradient with that of the batch's mean of 0.5 (prediction - target)^2 and
  // returns that mean. Sample i reads ids[i * fields, (i + 1) * fields).
  double forward_backward(std::span<const std::uint32_t> ids, std::span<const float> targets) {
    std::ranges::fill(grad_w, 0.0f);
    grad_b[0] = 0.0f;
    double loss = 0.0;
    for (std::size_t i = 0; i < targets.size(); ++i) {
      const std::span<const std::uint32_t> sample = ids.subspan(i * fields, fields);
      float prediction = b[0];
      for (std::uint32_t id : sample)
        for (std::size_t c = 0; c < dim; ++c) prediction += table[id * dim + c] * w[c];
      const float error = prediction - targets[i];
      loss += 0.5 * error * error;
      const float d = error / static_cast<float>(targets.size());
      grad_b[0] += d;
      for (std::size_t f = 0; f < fields; ++f)
        for (std::size_t c = 0; c < dim; ++c) {
          grad_w[c] += d * table[sample[f] * dim + c];
          row_grads[(i * fields + f) * dim + c] = d * w[c];
        }
    }
    return loss / static_cast<double>(targets.size());
  }
};

int main(int argc, char** argv) {
  return run_main(argc, argv, [](mpi::context& ctx) {
    // The planted model: every id has a hidden value and a sample's target is the sum of its
    // ids' values, so a student that learns embedding[id] . w = value[id] reaches a loss of 0.
    std::mt19937_64 engine(42);  // the same seed on every rank: the same planted model
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> value(rows);
    for (float& v : value) v = normal(engine);

    student net;
    for (float& e : net.table) e = 0.1f * normal(engine);
    for (float& x : net.w) x = normal(engine);
    auto model = make_model(variable<Embedding>("embedding", net.table, {}, {rows, dim}),  // its gradient comes as rows
                            variable<Head>("head.weight", net.w, net.grad_w, {dim}),
                            variable<Head>("head.bias", net.b, net.grad_b, {1}));
    // Adagrad for the rows, each seen by few batches; SGD for the head, seen by every batch.
    using optimizer = optim::dense_and_sparse<optim::sgd, optim::adagrad>;
    auto exec = make_executor(ctx, model, optimizer{{.lr = 0.05f}, {.lr = 0.3f}});
    const variable_id embedding = model.id("embedding");
    if (ctx.rank() == 0)
      for (const sync::ps::shard_plan& shard : exec.parameter_server_plan()->variables[0].shards)
        fmt::print("embedding rows {}-{} are served by rank {}\n", shard.first_row, shard.first_row + shard.rows - 1,
                   shard.host);

    std::mt19937_64 draws(1000 + static_cast<std::uint64_t>(ctx.rank()));  // each rank its own samples
    std::uniform_int_distribution<std::uint32_t> any_id(0, rows - 1);
    std::vector<std::uint32_t> ids(batch * fields);
    std::vector<float> targets(batch);
    double loss_sum = 0.0, loss = 0.0;
    for (int u = 1; u <= updates; ++u) {
      for (std::uint32_t& id : ids) id = any_id(draws);
      for (std::size_t i = 0; i < batch; ++i) {
        targets[i] = 0.0f;
        for (std::size_t f = 0; f < fields; ++f) targets[i] += value[ids[i * fields + f]];
      }
      exec.pull(embedding, ids);  // the rows this batch reads, with every rank's updates so far
      loss_sum += net.forward_backward(ids, targets);
      exec.sparse_gradient(embedding, ids, net.row_grads);  // repeated ids add up
      exec.step();  // pushes the rows to their shards and all-reduces the head

      if (u % report_every != 0) continue;
      double window[] = {loss_sum / report_every};
      ctx.control().allreduce_sum(std::span<double>(window));
      loss = window[0] / ctx.size();
      loss_sum = 0.0;
      if (ctx.rank() == 0) fmt::print("update {:3}: loss {:.3g}\n", u, loss);
    }
    const bool reached = loss < target_loss;
    if (ctx.rank() == 0)
      fmt::print("{}: loss {:.3g} after {} updates, {} {}\n", strategy_name<Embedding>(), loss, exec.updates(),
                 reached ? "below" : "NOT below", target_loss);
    return reached ? 0 : 1;
  });
}
