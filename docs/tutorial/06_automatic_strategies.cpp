// 6. Automatic strategies: strata's planner chooses each variable's strategy from a calibration
// of this job, trial runs of the best plans settle it, and the model trains with the fastest.
//
//   mpirun -np 2 tutorial_06_automatic_strategies                    # the planner chooses
//   mpirun -np 2 tutorial_06_automatic_strategies 'AllReduce<Tree>'  # the dense variables take this
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <strata/plan/auto_strategy.hpp>
#include <strata/plan/calibrate.hpp>
#include <strata/strata.hpp>

using namespace strata;

// The planner chooses among strategies, but training needs their types: the program compiles
// a few, and one model type holds every variable under whichever of them the plan names.
template <class... S>
struct compiled_strategies {
  using model_type = model<S...>;
  static bool contains(const strategy_descriptor& d) { return ((S::descriptor == d) || ...); }
  template <class F>
  static void visit(std::string_view text, F&& f) { visit_strategy<S...>(text, std::forward<F>(f)); }
};
using compiled = compiled_strategies<Strategy<AllReduce<Ring>>, Strategy<AllReduce<Tree>>,
                                     Strategy<AllReduce<Ring>, Compress<FP16>>,         // dense gradients
                                     Strategy<AllReduce<Ring>, SparseRows>,             // a table's rows, gathered
                                     Strategy<PS<2>, Partition<0>, SparseRows>>;        // or on 2 server shards

// A planted task: y = W x + b + E[id], a teacher's W, b and table E to recover from samples.
constexpr std::size_t features = 512, outputs = 64, rows = 256, batch = 16;  // batch: per rank

struct regression {
  std::vector<float> weight, weight_grad, bias, bias_grad, table;
  regression()
      : weight(outputs * features), weight_grad(weight.size()), bias(outputs), bias_grad(outputs), table(rows * outputs) {}
  float predict(const float* x, std::uint32_t id, std::size_t o) const {
    float y = bias[o] + table[id * outputs + o];
    for (std::size_t i = 0; i < features; ++i) y += weight[o * features + i] * x[i];
    return y;
  }
};

regression teacher() {
  regression t;
  std::mt19937 engine(6);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& w : t.weight) w = normal(engine) / 16;  // W x has about the variance of b and E's entries
  for (std::vector<float>* v : {&t.bias, &t.table})
    for (float& value : *v) value = normal(engine);
  return t;
}

// What the cost model needs to know of each variable, in the order the model declares them.
const std::vector<plan::variable_profile> profiles = {
    {"weight", {outputs, features}},
    {"bias", {outputs}},
    {"table", {rows, outputs}, /*sparse=*/true, /*touched_fraction=*/double(batch) / rows},
};

/// The student's variables in a model, each under its strategy of `strategies` (canonical
/// strings, one per profile).
compiled::model_type declare(regression& s, const std::vector<std::string>& strategies) {
  compiled::model_type m;
  auto add = [&]<std::size_t Rank>(std::size_t i, host_buffer param, host_buffer grad, const std::size_t (&shape)[Rank]) {
    compiled::visit(strategies[i],
                    [&]<class S>(std::type_identity<S>) { m.add(variable<S>(profiles[i].name, param, grad, shape)); });
  };
  add(0, s.weight, s.weight_grad, {outputs, features});
  add(1, s.bias, s.bias_grad, {outputs});
  add(2, s.table, {}, {rows, outputs});  // its gradient comes as rows (sparse_gradient)
  return m;
}

/// One update on this rank's batch number `step`; returns the batch's mean squared error.
double train_step(auto& exec, regression& s, const regression& goal, int rank, int step) {
  std::mt19937 engine(static_cast<unsigned>(step * 1009 + rank));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(batch * features), row_grads(batch * outputs);
  std::vector<std::uint32_t> ids(batch);
  for (float& v : x) v = uniform(engine);
  for (std::uint32_t& id : ids) id = static_cast<std::uint32_t>(engine() % rows);
  const variable_id table{2};  // declare()'s third variable
  exec.pull(table, ids);  // a table on servers fetches the rows this batch reads
  std::ranges::fill(s.weight_grad, 0.0f);
  std::ranges::fill(s.bias_grad, 0.0f);
  double squared = 0.0;
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t o = 0; o < outputs; ++o) {
      const float* xb = &x[b * features];
      const float error = s.predict(xb, ids[b], o) - goal.predict(xb, ids[b], o), g = error / batch;
      squared += error * error;
      s.bias_grad[o] += g;
      row_grads[b * outputs + o] = g;
      for (std::size_t i = 0; i < features; ++i) s.weight_grad[o * features + i] += g * xb[i];
    }
  exec.sparse_gradient(table, ids, row_grads);
  exec.step();
  return squared / (batch * outputs);
}

double mean_over_ranks(mpi::context& ctx, double value) {
  auto sum = ctx.control().iallreduce_sum(std::span<double>(&value, 1));
  ctx.control().wait(sum);
  return value / ctx.size();
}

// A table's row is in few samples of a batch: Adagrad keeps its steps large where SGD's would be
// a batch's share of the row's gradient.
const optim::dense_and_sparse<optim::sgd, optim::adagrad> optimizer{{.lr = 0.1f}, {.lr = 1.0f}};

/// The model's ranking is only as good as its calibration: a few steps of each of the best
/// plans, timed as the slowest rank saw them (the same on every rank), and the fastest kept.
std::vector<std::string> fastest_by_trial(mpi::context& ctx, const plan::strategy_plan& chosen, const regression& goal) {
  std::vector<std::string> fastest;
  double fastest_s = INFINITY;
  for (const plan::scored_plan& candidate : plan::trial_candidates(chosen, 3)) {
    regression student;
    auto m = declare(student, candidate.strategies);
    auto exec = make_executor(ctx, m, optimizer);
    int step = 0;
    const double seconds = plan::slowest_rank_median(ctx, 5, [&] { train_step(exec, student, goal, ctx.rank(), step++); });
    if (ctx.rank() == 0)
      fmt::print("trial: predicted sync {:6.3f} ms, measured step {:6.3f} ms  {}\n", 1e3 * candidate.predicted_s,
                 1e3 * seconds, candidate.name);
    if (seconds < fastest_s) fastest_s = seconds, fastest = candidate.strategies;
  }
  return fastest;
}

int main(int argc, char** argv) {
  return strata::run_main(argc, argv, [&](mpi::context& ctx) {
    // A strategy on the command line, checked before anything is measured: one that is malformed
    // or not compiled in throws on every rank, and run_main ends the job with exit 64.
    std::string forced;
    if (argc > 1) compiled::visit(argv[1], [&]<class S>(std::type_identity<S>) { forced = strategy_name<S>(); });

    // Measure this job, briefly: small sizes and few repeats are enough to rank a few strategies.
    plan::calibrate_options quick;
    quick.repeats = 1;
    quick.allreduce_bytes = quick.parameter_server_bytes = {16 << 10, 256 << 10};
    quick.sparse_rows_touched = {64, 1024};
    const plan::calibration calibration = plan::calibrate(ctx, quick);
    const plan::cost_model model(calibration, plan::this_job(ctx));
    const plan::strategy_plan chosen = plan::auto_strategy(profiles, model, {.offer = compiled::contains});
    if (ctx.rank() == 0) fmt::print("{}", plan::describe(chosen, profiles));

    // Trial runs settle the plan; a strategy from the command line replaces it instead, for the
    // variables of its gradient form (dense, or SparseRows).
    const regression goal = teacher();
    std::vector<std::string> strategies = forced.empty() ? fastest_by_trial(ctx, chosen, goal) : chosen.strategies;
    for (std::size_t i = 0; i < profiles.size() && !forced.empty(); ++i)
      if (parse_strategy(forced).sparse_rows == profiles[i].sparse) strategies[i] = forced;

    regression student;
    auto m = declare(student, strategies);
    auto exec = make_executor(ctx, m, optimizer);  // checks that every rank declared the same plan
    if (ctx.rank() == 0)
      for (const variable_binding& v : m.variables()) fmt::print("training {:<6} with {}\n", v.name, v.strategy);
    double first = 0.0, last = 0.0;
    for (int step = 0; step < 150; ++step) {
      last = mean_over_ranks(ctx, train_step(exec, student, goal, ctx.rank(), step));
      if (step == 0) first = last;
      if (ctx.rank() == 0 && (step + 1) % 50 == 0) fmt::print("update {:3}: mean squared error {:.5f}\n", step + 1, last);
    }
    const bool reached = last < first / 100;  // the planted W, b and E recovered, whatever the plan
    if (ctx.rank() == 0)
      fmt::print("{}: mean squared error {:.3f} -> {:.5f}, under a hundredth of the first\n",
                 reached ? "reached" : "NOT reached", first, last);
    return reached ? 0 : 1;
  });
}
