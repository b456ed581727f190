// A Vision Transformer on Fashion-MNIST, split over a mesh of data, tensor and pipeline groups:
//
//   mpirun -np 8 ./vit --mesh dp=2,tp=2,pp=2 --epochs 10
//
// Heads and the MLP's width are split over the tensor group, blocks over the pipeline stages
// (the patch embedding on the first, the norm and head on the last), and each stage's
// gradients are averaged over its data group by the executor, with Adam. The pipeline runs
// --micro-batches micro-batches of each global batch under --schedule (1F1B or GPipe). Every
// rank shuffles with the same seed, so a global batch is the same images on every mesh.
//
// --check-against-one-rank N trains N updates on the mesh and, on every rank, the same N on
// one rank alone, then compares every rank's part of every parameter with the same part of
// the one-rank model (tolerance --tolerance, relative to the tensor's largest value).
//
// --strategy Ring|Tree|Native is the data groups' all-reduce; --strategy auto lets the cost
// model rank them on every stage's parameters and --trials K of them train a few updates.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <strata/plan/calibrate.hpp>
#include <strata/plan/cost_model.hpp>
#include <strata/strata.hpp>

#include "../common/blas.hpp"
#include "../common/rank_main.hpp"
#include "../common/save_state.hpp"
#include "../fashion_mnist/idx.hpp"
#include "vit.hpp"

namespace {

struct options {
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::string mesh = "";
  std::string schedule = "1f1b";
  int epochs = 10;
  int global_batch = 128;
  int micro_batches = 4;
  std::string optimizer = "adam";
  float lr = 1e-3f;
  std::uint64_t seed = 1;
  int max_steps = 0;  // updates per epoch at most (0: the whole epoch)
  int check_against_one_rank = 0;
  double tolerance = 1e-4;
  std::string checkpoints;
  std::string save_state;  // each rank's parameters as placed in the whole model (safetensors)
  std::string strategy = "Ring";  // the data groups' all-reduce, or auto
  std::string calibration;        // --strategy auto: the job's calibration (else measured at start)
  int trials = 2;                 // --strategy auto: algorithms timed before the fastest is kept
};

/// Calls f with the all-reduce algorithm `name` names (Ring, Tree or Native).
template <class F>
decltype(auto) with_algorithm(const std::string& name, F&& f) {
  if (name == "Tree") return f(std::type_identity<strata::Tree>{});
  if (name == "Native") return f(std::type_identity<strata::Native>{});
  return f(std::type_identity<strata::Ring>{});
}

/// This rank's part of the ViT on `grid`, with its executor (optimizer O, data groups
/// averaging with all-reduce Algorithm) and pipeline driver.
template <class Context, class O, class Algorithm>
class trainer {
  using model_type = typename vit::strategies<Algorithm>::model_type;

 public:
  trainer(strata::mesh<Context>& grid, const options& o, vit::config c, O optimizer)
      : grid_(&grid), o_(o), net_(c, grid.shape(), grid.coordinates()), model_(net_.template declare<Algorithm>()),
        exec_(strata::make_executor(grid, model_, optimizer, {.accumulation_steps = o.micro_batches})),
        pipe_(strata::pipeline::make_driver(
            grid, std::vector<std::size_t>(static_cast<std::size_t>(grid.shape().pp - 1), net_.boundary(micro_size())))) {
    if (o.global_batch % (grid.shape().dp * o.micro_batches) != 0)
      throw strata::usage_error(fmt::format("--global-batch {} does not split into dp={} x --micro-batches {}", o.global_batch,
                                            grid.shape().dp, o.micro_batches));
  }

  /// Images per micro-batch on this rank.
  std::size_t micro_size() const {
    return static_cast<std::size_t>(o_.global_batch / (grid_->shape().dp * o_.micro_batches));
  }

  /// One update from the global batch `batch` (indices into `data`); returns this rank's sum
  /// of the micro-batches' mean losses (the last stage's; 0 elsewhere).
  double update(const fashion_mnist::dataset& data, std::span<const std::size_t> batch) {
    const std::size_t n = micro_size();
    const std::span<const std::size_t> mine = batch.subspan(static_cast<std::size_t>(grid_->coordinates().dp) * n *
                                                                static_cast<std::size_t>(o_.micro_batches),
                                                            n * static_cast<std::size_t>(o_.micro_batches));
    auto& tp = grid_->tensor();
    double loss = 0.0;
    std::vector<std::vector<float>> logits(static_cast<std::size_t>(o_.micro_batches));
    auto forward = [&](int i, std::span<const float> in, std::span<float> out) {
      const std::vector<float> images = gather_images(data, mine.subspan(static_cast<std::size_t>(i) * n, n));
      logits[static_cast<std::size_t>(i)] = net_.forward(tp, i, n, images, in, out);
    };
    auto backward = [&](int i, std::span<const float> out_grad, std::span<float> in_grad) {
      std::vector<float> dlogits;
      if (net_.last_stage()) {
        const auto labels = mine.subspan(static_cast<std::size_t>(i) * n, n);
        dlogits = logits[static_cast<std::size_t>(i)];
        for (std::size_t k = 0; k < n; ++k) loss += softmax_cross_entropy(std::span<float>(dlogits).subspan(k * 10, 10),
                                                                        data.labels[labels[k]], n);
      }
      net_.backward(tp, i, dlogits, out_grad, in_grad);
      exec_.step();  // the last micro-batch's step averages over the data group and updates
    };
    if (o_.schedule == "gpipe") pipe_.run(strata::pipeline::gpipe{}, o_.micro_batches, forward, backward);
    else pipe_.run(strata::pipeline::one_f_one_b{}, o_.micro_batches, forward, backward);
    return loss;
  }

  /// Correct predictions on `data`'s images [begin, end) (the last stage's; 0 elsewhere).
  std::size_t correct(const fashion_mnist::dataset& data, std::size_t begin, std::size_t end) {
    const std::size_t n = micro_size();
    std::size_t right = 0;
    for (std::size_t at = begin; at < end; at += n * static_cast<std::size_t>(o_.micro_batches)) {
      const std::size_t count = std::min(n * static_cast<std::size_t>(o_.micro_batches), end - at);
      const int micro = static_cast<int>((count + n - 1) / n);
      auto& tp = grid_->tensor();
      std::vector<std::size_t> indices(n * static_cast<std::size_t>(micro));
      std::iota(indices.begin(), indices.end(), at);
      for (std::size_t& i : indices) i = std::min(i, end - 1);  // a short last micro-batch repeats its last image
      pipe_.run_forward(micro, [&](int i, std::span<const float> in, std::span<float> out) {
        const auto part = std::span<const std::size_t>(indices).subspan(static_cast<std::size_t>(i) * n, n);
        const std::vector<float> logits = net_.forward(tp, -1 - i, n, gather_images(data, part), in, out);
        net_.forget(-1 - i);
        if (!net_.last_stage()) return;
        for (std::size_t k = 0; k < n && static_cast<std::size_t>(i) * n + k < count; ++k) {
          const auto first = logits.begin() + static_cast<std::ptrdiff_t>(k * 10);
          right += static_cast<std::size_t>(std::max_element(first, first + 10) - first) == data.labels[part[k]];
        }
      });
    }
    return right;
  }

  vit::model& net() { return net_; }
  auto& executor() { return exec_; }

 private:
  static std::vector<float> gather_images(const fashion_mnist::dataset& data, std::span<const std::size_t> which) {
    std::vector<float> images(which.size() * fashion_mnist::dataset::pixels);
    for (std::size_t k = 0; k < which.size(); ++k)
      std::copy_n(data.images.begin() + static_cast<std::ptrdiff_t>(which[k] * fashion_mnist::dataset::pixels),
                  fashion_mnist::dataset::pixels, images.begin() + static_cast<std::ptrdiff_t>(k * fashion_mnist::dataset::pixels));
    return images;
  }

  /// Turns `logits` into the gradient of the mean loss over `n` images; returns this image's share.
  static double softmax_cross_entropy(std::span<float> logits, std::uint8_t label, std::size_t n) {
    const float top = *std::max_element(logits.begin(), logits.end());
    float sum = 0.0f;
    for (float& v : logits) sum += (v = std::exp(v - top));
    const double loss = -std::log(static_cast<double>(logits[label] / sum)) / static_cast<double>(n);
    for (std::size_t c = 0; c < logits.size(); ++c)
      logits[c] = (logits[c] / sum - (c == label ? 1.0f : 0.0f)) / static_cast<float>(n);
    return loss;
  }

  strata::mesh<Context>* grid_;
  options o_;
  vit::model net_;
  model_type model_;
  decltype(strata::make_executor(std::declval<strata::mesh<Context>&>(), std::declval<model_type&>(),
                                 std::declval<O>())) exec_;
  decltype(strata::pipeline::make_driver(std::declval<strata::mesh<Context>&>(), {})) pipe_;
};

/// The global batches of an epoch: a shuffle of the training set, the same on every rank.
std::vector<std::size_t> shuffled(std::size_t n, std::uint64_t seed, int epoch) {
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::mt19937_64 engine(seed * 7919u + static_cast<std::uint64_t>(epoch));
  std::shuffle(order.begin(), order.end(), engine);
  return order;
}

/// Sums over the world: what only some ranks know (the last stage's losses and counts).
template <class C>
std::vector<double> sum_over_world(C& comm, std::vector<double> mine) {
  std::vector<double> all(mine.size() * static_cast<std::size_t>(comm.size()));
  comm.allgather(std::span<const double>(mine), std::span<double>(all));
  std::vector<double> sum(mine.size(), 0.0);
  for (std::size_t i = 0; i < all.size(); ++i) sum[i % mine.size()] += all[i];
  return sum;
}

/// Trains `updates` updates on `grid` (or, with updates = 0, o.epochs epochs with a test
/// evaluation after each); returns the trainer's parameters.
template <class Algorithm, class Context, class O>
std::vector<vit::parameter> train(strata::mpi::context& world, strata::mesh<Context>& grid, const options& o, O optimizer,
                                  const fashion_mnist::dataset& train_set, const fashion_mnist::dataset& test_set,
                                  int updates, bool report) {
  trainer<Context, O, Algorithm> t(grid, o, vit::config{.seed = o.seed}, optimizer);
  if (report && world.rank() == 0)  // once the trainer has accepted the mesh and the batch
    fmt::print("vit: mesh {}, {} schedule, {} micro-batches of {} images per replica, {} lr {}\n",
               strata::to_string(grid.shape()), o.schedule, o.micro_batches,
               o.global_batch / (grid.shape().dp * o.micro_batches), o.optimizer, o.lr);
  const bool counts = t.net().last_stage() && grid.coordinates().tp == 0;  // one copy of each loss and count
  const std::size_t batch = static_cast<std::size_t>(o.global_batch);
  std::optional<strata::ckpt::store> store;
  int first_epoch = 1;
  if (!o.checkpoints.empty()) {
    store.emplace(o.checkpoints);
    if (const auto restored = t.executor().restore_checkpoint(*store)) {
      // Weights imported from elsewhere (strata-ckpt import) come without an epoch.
      if (const auto epoch = restored->meta.find("epoch"); epoch != restored->meta.end()) first_epoch = std::stoi(epoch->second) + 1;
      if (report && world.rank() == 0) fmt::print("resumed after epoch {}\n", first_epoch - 1);
    }
  }
  const int epochs = updates > 0 ? 1 : o.epochs;
  if (batch > train_set.size())
    throw examples::flag_error("--global-batch", fmt::format("{} is larger than the {} training images: no update "
                                                             "would run", batch, train_set.size()));
  const std::int64_t updates_before = t.executor().updates();
  std::size_t steps = train_set.size() / batch;  // per epoch
  if (updates > 0) steps = static_cast<std::size_t>(updates);
  else if (o.max_steps > 0) steps = std::min(steps, static_cast<std::size_t>(o.max_steps));
  // The learning rate rises linearly over the first epoch's updates (at most 200), then
  // falls along a cosine to 1% of --lr at the last update.
  const double total = static_cast<double>(steps) * epochs, warm_up = std::min(200.0, static_cast<double>(steps));
  auto learning_rate = [&](double update) {
    if (update < warm_up) return o.lr * static_cast<float>((update + 1) / warm_up);
    const double done = (update - warm_up) / std::max(1.0, total - warm_up);
    return o.lr * static_cast<float>(0.01 + 0.99 * 0.5 * (1.0 + std::cos(3.14159265358979 * done)));
  };
  for (int epoch = first_epoch; epoch <= epochs; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    const std::vector<std::size_t> order = shuffled(train_set.size(), o.seed, epoch);
    double loss = 0.0;
    for (std::size_t s = 0; s < steps; ++s) {
      t.executor().optimizer().lr = learning_rate(static_cast<double>(t.executor().updates()));
      loss += t.update(train_set, std::span(order).subspan(s * batch, batch));
    }
    if (updates > 0) break;
    // Each data replica evaluates its share of the test set.
    const std::size_t share = (test_set.size() + static_cast<std::size_t>(grid.shape().dp) - 1) / static_cast<std::size_t>(grid.shape().dp);
    const std::size_t begin = std::min(test_set.size(), share * static_cast<std::size_t>(grid.coordinates().dp));
    const std::size_t right = t.correct(test_set, begin, std::min(test_set.size(), begin + share));
    const std::vector<double> totals = sum_over_world(
        world.control(), {counts ? loss : 0.0, counts ? static_cast<double>(right) : 0.0, counts ? 1.0 : 0.0});
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (report && world.rank() == 0)
      fmt::print("epoch {:2}  loss {:.4f}  test accuracy {:.2f}%  ({:.1f} s)\n", epoch,
                 totals[0] / (totals[2] * static_cast<double>(steps) * o.micro_batches),
                 100.0 * totals[1] / static_cast<double>(test_set.size()), seconds);
    if (report && world.rank() == 0 && epoch == epochs)
      fmt::print("summary: mesh={} schedule={} strategy=AllReduce<{}> epochs={} test_accuracy={:.4f}\n",
                 strata::to_string(grid.shape()), o.schedule, o.strategy, epochs, totals[1] / static_cast<double>(test_set.size()));
    if (store) t.executor().save_checkpoint(*store, {{"epoch", std::to_string(epoch)}});
  }
  // A comparison of meshes must compare training: a run that trained less than asked (a
  // checkpoint that restored a finished run) proves nothing.
  if (updates > 0 && t.executor().updates() - updates_before != updates)
    throw strata::usage_error(fmt::format("asked to train {} updates to compare, but {} ran (resumed from a checkpoint?)",
                                          updates, t.executor().updates() - updates_before));
  if (report && !o.save_state.empty())
    examples::save_rank_state(t.executor(), fmt::format("{}.rank-{}.safetensors", o.save_state, world.rank()));
  return t.net().parameters();
}

/// Seconds of one update of the slowest rank, the median over `updates` updates (after two
/// untimed ones): a trial run of Algorithm (collective).
template <class Algorithm, class Context, class O>
double time_updates(strata::mpi::context& world, strata::mesh<Context>& grid, const options& o, O optimizer,
                    const fashion_mnist::dataset& train_set, int updates) {
  trainer<Context, O, Algorithm> t(grid, o, vit::config{.seed = o.seed}, optimizer);
  const std::vector<std::size_t> order = shuffled(train_set.size(), o.seed, 1);
  const auto batch = static_cast<std::size_t>(o.global_batch);
  std::size_t s = 0;
  return strata::plan::slowest_rank_median(world, updates,
                                           [&] { t.update(train_set, std::span(order).subspan(s++ * batch, batch)); });
}

/// --strategy auto: the cost model predicts each algorithm's synchronization of every
/// stage's parameters over its data group (summed over the world, so every rank ranks them
/// alike), then the --trials best train a few updates each and the fastest is returned.
template <class Context, class O>
std::string automatic_algorithm(strata::mpi::context& world, strata::mesh<Context>& grid, const options& o, O optimizer,
                                const fashion_mnist::dataset& train_set) {
  namespace plan = strata::plan;
  const int dp = grid.shape().dp;
  if (o.calibration.empty() && world.rank() == 0)
    fmt::print("--strategy auto: calibrating (give --calibration FILE from strata-calibrate to skip this)\n");
  const plan::calibration calibration = plan::load_or_calibrate(world, o.calibration);
  const plan::cluster job = plan::this_job(world);
  vit::model part(vit::config{.seed = o.seed}, grid.shape(), grid.coordinates());
  std::vector<plan::variable_profile> variables;
  for (const vit::parameter& p : part.parameters()) variables.push_back({p.name, p.shape});
  const std::vector<std::string> algorithms = {"Ring", "Tree", "Native"};
  std::vector<double> predicted;
  for (const std::string& a : algorithms) {
    const std::vector<std::string> strategies(variables.size(), "AllReduce<" + a + ">");
    // A data group of dp ranks, packed on hosts as the world's ranks are.
    const plan::cost_model model(calibration, {dp, std::min(dp, job.ranks_per_host)});
    predicted.push_back(dp > 1 ? model.predict(variables, strategies).total() : 0.0);
  }
  predicted = sum_over_world(world.control(), predicted);
  std::vector<std::size_t> order(algorithms.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::ranges::sort(order, {}, [&](std::size_t k) { return predicted[k]; });
  if (world.rank() == 0) {
    fmt::print("--strategy auto: predicted synchronization per update over data groups of {} (all stages):\n", dp);
    for (std::size_t k : order) fmt::print("  {:<18} {:8.3f} ms\n", "AllReduce<" + algorithms[k] + ">", 1e3 * predicted[k]);
  }
  std::string fastest = algorithms[order.front()];
  double fastest_s = INFINITY;
  for (std::size_t i = 0; i < std::min(order.size(), static_cast<std::size_t>(o.trials)); ++i) {
    const std::string& a = algorithms[order[i]];
    const double seconds = with_algorithm(a, [&]<class A>(std::type_identity<A>) {
      return time_updates<A>(world, grid, o, optimizer, train_set, 4);
    });
    if (world.rank() == 0)
      fmt::print("  trial {:<18} predicted sync {:8.3f} ms, measured update {:8.3f} ms\n", "AllReduce<" + a + ">",
                 1e3 * predicted[order[i]], 1e3 * seconds);
    if (seconds < fastest_s) fastest_s = seconds, fastest = a;
  }
  if (world.rank() == 0) fmt::print("--strategy auto: training with AllReduce<{}>\n", fastest);
  return fastest;
}

/// The largest difference of this rank's part of each parameter from the one-rank model's,
/// relative to the whole tensor's largest value.
double largest_difference(const std::vector<vit::parameter>& mine, const std::vector<vit::parameter>& whole, int tp, int tp_rank) {
  double worst = 0.0;
  for (const vit::parameter& p : mine) {
    const auto w = std::find_if(whole.begin(), whole.end(), [&](const vit::parameter& q) { return q.name == p.name; });
    if (w == whole.end()) throw std::runtime_error("the one-rank model has no " + p.name);
    double scale = 1e-6, difference = 0.0;
    for (float v : w->value) scale = std::max(scale, static_cast<double>(std::fabs(v)));
    const std::size_t cols = p.shape.size() == 2 ? p.shape[1] : 1, whole_cols = w->shape.size() == 2 ? w->shape[1] : 1;
    const std::size_t r0 = p.split == 0 ? p.shape[0] * static_cast<std::size_t>(tp_rank) : 0;
    const std::size_t c0 = p.split == 1 ? cols * static_cast<std::size_t>(tp_rank) : 0;
    if (p.split >= 0 && tp == 1 && p.value.size() != w->value.size()) throw std::runtime_error("shape mismatch of " + p.name);
    for (std::size_t i = 0; i < p.value.size(); ++i)
      difference = std::max(difference, static_cast<double>(std::fabs(p.value[i] - w->value[(r0 + i / cols) * whole_cols + c0 + i % cols])));
    worst = std::max(worst, difference / scale);
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  examples::use_blas_single_threaded(argv);  // one core per rank: ranks are the parallelism
  options o;
  CLI::App app{"A Vision Transformer on Fashion-MNIST, split over a mesh of data, tensor and pipeline groups"};
  app.add_option("--data", o.data, "folder of the Fashion-MNIST IDX files");
  app.add_option("--mesh", o.mesh, "axes, e.g. dp=2,tp=2,pp=2 (default: data-parallel over every rank)");
  app.add_option("--schedule", o.schedule, "pipeline schedule: 1f1b or gpipe")->check(CLI::IsMember({"1f1b", "gpipe"}));
  examples::number(app, "--epochs", o.epochs, 1, 1000, "epochs");
  examples::number(app, "--global-batch", o.global_batch, 1, 1 << 16, "images per update, over all data replicas");
  examples::number(app, "--micro-batches", o.micro_batches, 1, 1024, "micro-batches per update in the pipeline");
  app.add_option("--optimizer", o.optimizer, "adam, or sgd (momentum 0.9)")->check(CLI::IsMember({"adam", "sgd"}));
  examples::number(app, "--lr", o.lr, 1e-6f, 1.0f, "the optimizer's learning rate");
  examples::number(app, "--seed", o.seed, std::uint64_t{0}, std::numeric_limits<std::uint64_t>::max(),
                   "initialization and shuffling seed");
  examples::number(app, "--max-steps", o.max_steps, 0, 1 << 30, "updates per epoch at most (0: all)");
  examples::number(app, "--check-against-one-rank", o.check_against_one_rank, 0, 100000,
                   "train this many updates on the mesh and on one rank alone, and compare");
  examples::number(app, "--tolerance", o.tolerance, 0.0, 1.0, "--check-against-one-rank's relative tolerance");
  app.add_option("--checkpoints", o.checkpoints, "a folder: save after each epoch, resume from the newest checkpoint")
      ->excludes("--check-against-one-rank");
  app.add_option("--save-state", o.save_state,
                 "at the end, each rank writes the parameters it holds to PREFIX.rank-K.safetensors (slices of the whole "
                 "tensors, for comparing with strata-ckpt export)");
  examples::one_of(app, "--strategy", o.strategy, {"Ring", "Tree", "Native", "auto"},
                   "the data groups' all-reduce (every variable), or auto: the cost model's choice, refined by trial runs");
  app.add_option("--calibration", o.calibration, "--strategy auto: this job's calibration (strata-calibrate --output)");
  examples::number(app, "--trials", o.trials, 0, 3, "--strategy auto: algorithms timed before the fastest is kept (0: the model alone)");
  return examples::parse_and_run(app, argc, argv, "vit", [&](strata::mpi::context& ctx) {
    if (o.strategy != "auto") examples::refuse_unused(app, {"--calibration", "--trials"}, "--strategy auto");
    // What the run will write, before it starts: not found unwritable after training.
    if (!o.checkpoints.empty()) strata::require_writable_folder(o.checkpoints, "--checkpoints");
    if (!o.save_state.empty()) {  // a prefix: PREFIX.rank-R.safetensors
      strata::require_writable_file(o.save_state, "--save-state");
      strata::require_writable_file(fmt::format("{}.rank-{}.safetensors", o.save_state, ctx.rank()), "--save-state");
    }
    const fashion_mnist::dataset train_set = fashion_mnist::load(o.data, "train");
    const fashion_mnist::dataset test_set = fashion_mnist::load(o.data, "t10k");
    strata::mesh grid(ctx, strata::parse_mesh(o.mesh, ctx.size()));
    auto with_optimizer = [&](auto&& run) {
      if (o.optimizer == "sgd") return run(strata::optim::sgd{.lr = o.lr, .momentum = 0.9f});
      return run(strata::optim::adam{.lr = o.lr});
    };
    if (o.strategy == "auto")
      o.strategy = with_optimizer([&](auto optimizer) { return automatic_algorithm(ctx, grid, o, optimizer, train_set); });
    if (o.check_against_one_rank == 0) {
      with_algorithm(o.strategy, [&]<class A>(std::type_identity<A>) {
        with_optimizer([&](auto optimizer) { return train<A>(ctx, grid, o, optimizer, train_set, test_set, 0, true); });
      });
      return 0;
    }
    // Adam turns rounding in a near-zero gradient into a full step of either sign, so
    // compare meshes with SGD: --optimizer sgd.
    const auto mine = with_algorithm(o.strategy, [&]<class A>(std::type_identity<A>) {
      return with_optimizer([&](auto optimizer) {
        return train<A>(ctx, grid, o, optimizer, train_set, test_set, o.check_against_one_rank, false);
      });
    });
    strata::group_context<strata::mpi::context> alone(ctx, ctx.rank(), 0);
    strata::mesh one(alone, strata::mesh_shape{});
    const auto whole = with_optimizer([&](auto optimizer) {
      return train<strata::Ring>(ctx, one, o, optimizer, train_set, test_set, o.check_against_one_rank, false);
    });
    const double difference = largest_difference(mine, whole, grid.shape().tp, grid.coordinates().tp);
    std::vector<double> all(static_cast<std::size_t>(ctx.size()));
    ctx.control().allgather(std::span<const double>(&difference, 1), std::span<double>(all));
    const double largest = *std::max_element(all.begin(), all.end());
    if (ctx.rank() == 0)
      fmt::print("after {} updates the mesh's parameters differ from one rank's by at most {:.3g} relative (tolerance "
                 "{:.3g})\n",
                 o.check_against_one_rank, largest, o.tolerance);
    if (largest > o.tolerance || !std::isfinite(largest)) {
      if (ctx.rank() == 0) fmt::print(stderr, "vit: the mesh does not train the model one rank trains\n");
      return 1;
    }
    return 0;
  });
}
