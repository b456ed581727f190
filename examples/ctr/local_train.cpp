// Trains the Wide&Deep student on one process, without strata's synchronization, to show that
// the model and the data meet the quality target the distributed runs are held to: held-out
// AUC within --max-auc-gap of the planted model's own.
//
//   ./ctr_local_train --epochs 4 --steps-per-epoch 750
//
// Sparse rows are updated with row-wise Adagrad, touched rows only; dense tensors with Adam.
#include <chrono>
#include <cstdio>
#include <limits>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <strata/optim/adam.hpp>

#include "../common/blas.hpp"
#include "../common/cli.hpp"

#include "auc.hpp"
#include "data.hpp"
#include "model.hpp"
#include "rowwise_adagrad.hpp"

namespace {

struct options {
  int epochs = 4;
  long steps_per_epoch = 750;
  std::size_t batch = 512;
  std::size_t held_out = 100'000;
  float embedding_lr = 0.1f;
  float dense_lr = 1e-3f;
  std::uint64_t seed = 1;
  double max_auc_gap = 0.02;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int train(const options& o) {
  const auto start = std::chrono::steady_clock::now();
  const ctr::generator data(ctr::data_config{.seed = o.seed});
  const double setup_seconds = seconds_since(start);
  const auto draw_start = std::chrono::steady_clock::now();
  const ctr::batch held_out = data.held_out(o.held_out);
  const double draw_rate = static_cast<double>(held_out.size()) / seconds_since(draw_start);
  const double planted_auc = ctr::auc(held_out.planted_probability, held_out.labels);
  fmt::print("ctr local: {} fields hashed into {} rows (set-up {:.2f} s), {} held-out samples drawn at {:.0f} samples/s, "
             "planted AUC {:.4f}\n",
             data.config().fields(), data.config().table_rows, setup_seconds, held_out.size(), draw_rate, planted_auc);

  ctr::wide_deep net(ctr::model_config{.fields = data.config().fields(), .table_rows = data.config().table_rows, .seed = o.seed});
  const strata::optim::adam adam{.lr = o.dense_lr};
  std::vector<strata::optim::adam::state> adam_states;
  for (const auto& t : net.tensors()) adam_states.push_back(adam.make_state(t.param.size()));
  std::vector<ctr::rowwise_adagrad> adagrads;
  for (const auto& table : net.sparse_tables()) adagrads.emplace_back(table.rows, o.embedding_lr);

  ctr::batch batch;
  std::vector<float> predictions(held_out.size());
  double auc = 0.0, train_seconds = 0.0;
  long step = 0;
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    const auto epoch_start = std::chrono::steady_clock::now();
    double loss_sum = 0.0;
    for (long s = 0; s < o.steps_per_epoch; ++s, ++step) {
      data.draw_train_shard(static_cast<std::uint64_t>(step), o.batch, 0, 1, batch);
      loss_sum += net.forward_backward(batch);
      auto tensors = net.tensors();
      for (std::size_t i = 0; i < tensors.size(); ++i) adam.update(tensors[i].param, tensors[i].grad, adam_states[i], step + 1);
      auto tables = net.sparse_tables();
      for (std::size_t i = 0; i < tables.size(); ++i) adagrads[i].update(tables[i].param, tables[i].cols, *tables[i].grad);
    }
    const double epoch_seconds = seconds_since(epoch_start);
    train_seconds += epoch_seconds;
    net.predict(held_out, predictions);
    auc = ctr::auc(predictions, held_out.labels);
    fmt::print("epoch {}  loss {:.4f}  auc {:.4f}  samples/s {:.0f}  ({:.2f} s)\n", epoch,
               loss_sum / static_cast<double>(o.steps_per_epoch), auc,
               static_cast<double>(o.steps_per_epoch * static_cast<long>(o.batch)) / epoch_seconds, epoch_seconds);
    std::fflush(stdout);
  }

  const double gap = planted_auc - auc;
  fmt::print("summary: planted_auc={:.4f} auc={:.4f} gap={:.4f} samples={} train_seconds={:.2f} samples_per_second={:.0f} "
             "total_seconds={:.2f}\n",
             planted_auc, auc, gap, step * static_cast<long>(o.batch), train_seconds,
             static_cast<double>(step * static_cast<long>(o.batch)) / train_seconds, seconds_since(start));
  if (gap > o.max_auc_gap) {
    fmt::print(stderr, "held-out AUC {:.4f} is more than --max-auc-gap {:.4f} below the planted model's {:.4f}\n", auc,
               o.max_auc_gap, planted_auc);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  examples::use_blas_single_threaded(argv);  // one core: the distributed runs get their parallelism from ranks
  options o;
  CLI::App app{"Wide&Deep CTR model on synthetic data, trained on one process"};
  examples::number(app, "--epochs", o.epochs, 1, 10'000);
  examples::number(app, "--steps-per-epoch", o.steps_per_epoch, 1L, 100'000'000L, "updates between held-out evaluations");
  examples::number(app, "--batch", o.batch, std::size_t{1}, std::size_t{1'000'000}, "samples per update");
  examples::number(app, "--held-out", o.held_out, std::size_t{1}, std::size_t{10'000'000}, "held-out samples for AUC");
  examples::number(app, "--embedding-lr", o.embedding_lr, 0.0f, 100.0f, "row-wise Adagrad learning rate of the sparse tables");
  examples::number(app, "--dense-lr", o.dense_lr, 0.0f, 100.0f, "Adam learning rate of the MLP");
  examples::number(app, "--seed", o.seed, std::uint64_t{0}, std::numeric_limits<std::uint64_t>::max(),
                   "seeds the data, the planted model and the student");
  examples::number(app, "--max-auc-gap", o.max_auc_gap, 0.0, 1.0,
                   "exit non-zero if the held-out AUC ends further below the planted AUC");
  if (const auto status = examples::parse(app, argc, argv, "ctr_local_train")) return *status;
  try {
    return train(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "ctr_local_train: {}\n", e.what());
    return strata::exit_status_of(e);
  }
}
