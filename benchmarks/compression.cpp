// Gradient compression: bytes on the wire and synchronization time per codec, for the
// gradient shapes of ResNet-50 and VGG-16, interleaved (fp32 FP16 BF16 TopK PowerSGD, ...).
//
//   mpirun -np 2 ./compression --model vgg16
//   mpirun -np 2 ./compression --model resnet50 --codecs fp16,bf16     # fp32 is always timed
//   mpirun -np 4 ./compression --model resnet50 --algorithm hierarchical
//
// Every codec runs over strata's ring (or --algorithm) with 25 MiB buckets; the optimizer is a no-op, so
// only synchronization (encode, reduce, decode, error feedback) is timed. Convolution
// weights are declared as matrices (out, in x k x k), as PowerSGD sees them; vectors go
// uncompressed next to PowerSGD (vector_strategy_t).
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <strata/strata.hpp>

#include "measure.hpp"
#include "model_shapes.hpp"
#include "../examples/common/rank_main.hpp"

namespace {

using namespace strata;

/// The codecs that can be timed against fp32, as --codecs and the summary name them.
const std::vector<std::string> compressed_codecs = {"fp16", "bf16", "topk", "powersgd"};

/// One codec's executor over the shared gradient buffers.
struct codec_run {
  std::string key, name;                // as the summary names it, as the table shows it
  std::function<std::uint64_t()> step;  // returns bytes sent
  std::vector<std::uint64_t> bytes;
};

template <class S>
codec_run make_run(std::string key, std::string name, mpi::context& ctx, const std::vector<bench::tensor_shape>& shapes,
                   std::vector<strata::host_vector<float>>& params, std::vector<strata::host_vector<float>>& grads,
                   const executor_options& options) {
  using V = vector_strategy_t<S>;
  auto model = std::make_shared<model_of<S, V>>();
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const auto& dims = shapes[i].dims;
    if (dims.size() >= 2)
      model->add(variable<S>(shapes[i].name, params[i], grads[i], {dims[0], shapes[i].elements() / dims[0]}));
    else
      model->add(variable<V>(shapes[i].name, params[i], grads[i], {dims[0]}));
  }
  auto exec = std::make_shared<executor<mpi::context, model_of<S, V>, bench::no_update>>(ctx, *model, bench::no_update{}, options);
  const std::size_t n = shapes.size();
  return {std::move(key), std::move(name), [model, exec, n] {
            for (std::size_t i = n; i-- > 0;) exec->grad_ready(variable_id{i});
            return exec->step().bytes_sent;
          }};
}

template <class Algorithm>
void run_model(mpi::context& ctx, const std::string& model_name, int rounds, const std::vector<std::string>& codecs,
               const std::string& algorithm) {
  const auto shapes = model_name == "vgg16" ? bench::vgg16_shapes() : bench::resnet50_shapes();
  if (model_name == "vgg16") bench::expect_size(shapes, 32, 138'357'544);
  else bench::expect_size(shapes, 161, 25'557'032);
  std::vector<strata::host_vector<float>> params, grads;
  std::mt19937 rng(7u + static_cast<unsigned>(ctx.rank()));
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  for (const auto& s : shapes) {
    params.emplace_back(s.elements(), 0.0f);
    grads.emplace_back(s.elements());
    for (float& g : grads.back()) g = normal(rng);
  }
  executor_options options;
  options.compression.powersgd_warmup_steps = 0;
  using R = AllReduce<Algorithm>;
  std::vector<codec_run> runs;
  const auto time = [&]<class S>(std::type_identity<S>, std::string key, std::string name) {
    if (key == "fp32" || std::ranges::find(codecs, key) != codecs.end())
      runs.push_back(make_run<S>(std::move(key), std::move(name), ctx, shapes, params, grads, options));
  };
  time(std::type_identity<Strategy<R>>{}, "fp32", "fp32");  // the baseline, always
  time(std::type_identity<Strategy<R, Compress<FP16>>>{}, "fp16", "FP16");
  time(std::type_identity<Strategy<R, Compress<BF16>>>{}, "bf16", "BF16");
  time(std::type_identity<Strategy<R, Compress<TopK<0.01>, ErrorFeedback>>>{}, "topk", "TopK<0.01>+EF");
  time(std::type_identity<Strategy<R, Compress<PowerSGD<4>, ErrorFeedback>>>{}, "powersgd", "PowerSGD<4>+EF");

  std::vector<bench::contender> contenders;
  for (auto& run : runs) contenders.push_back({run.name, [&run] { run.bytes.push_back(run.step()); }});
  bench::interleave(contenders, rounds, 1, [&] { MPI_Barrier(ctx.control().native_handle()); });

  const double base_ms = 1e3 * bench::median(contenders[0].seconds);
  const double base_bytes = static_cast<double>(runs[0].bytes.back());
  std::map<std::string, std::pair<double, double>> ratios;  // by key: time, bytes
  if (ctx.rank() == 0) {
    std::size_t total = 0;
    for (const auto& s : shapes) total += s.elements();
    fmt::print("{}: {} tensors, {} parameters; {} ranks; AllReduce<{}>; 25 MiB buckets; medians of {} rounds\n",
               model_name, shapes.size(), total, ctx.size(), algorithm, rounds);
    fmt::print("  {:<16} {:>10} {:>14} {:>10} {:>10}\n", "codec", "ms", "MiB sent/rank", "time/fp32", "bytes/fp32");
  }
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const double ms = 1e3 * bench::median(contenders[i].seconds);
    const double bytes = static_cast<double>(runs[i].bytes.back());
    ratios[runs[i].key] = {ms / base_ms, bytes / base_bytes};
    if (ctx.rank() == 0)
      fmt::print("  {:<16} {:>10.2f} {:>14.2f} {:>10.3f} {:>10.4f}\n", runs[i].name, ms, bytes / (1 << 20), ms / base_ms,
                 bytes / base_bytes);
  }
  if (ctx.rank() != 0) return;
  // The codecs left out (--codecs) are left out of the summary too.
  std::string line =
      fmt::format("summary: model={} ranks={} algorithm={} fp32_ms={:.2f}", model_name, ctx.size(), algorithm, base_ms);
  for (std::size_t i = 1; i < runs.size(); ++i)
    line += fmt::format(" {}_time_ratio={:.3f}", runs[i].key, ratios[runs[i].key].first);
  if (ratios.contains("fp16")) line += fmt::format(" fp16_bytes_ratio={:.3f}", ratios["fp16"].second);
  for (const char* key : {"topk", "powersgd"})
    if (ratios.contains(key)) line += fmt::format(" {}_bytes_reduction={:.1f}", key, 1.0 / ratios[key].second);
  fmt::print("{}\n", line);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int rounds = 5;
  std::vector<std::string> models = {"resnet50", "vgg16"};
  CLI::App app{"gradient compression: bytes and synchronization time per codec"};
  app.add_flag("--quick", quick, "ResNet-50 only, 2 rounds (smoke test)");
  examples::number(app, "--rounds", rounds, 1, 1000, "interleaved rounds (medians are taken over them)");
  std::vector<std::string> codecs = compressed_codecs;
  app.add_option("--model", models, "resnet50 and/or vgg16")->check(CLI::IsMember({"resnet50", "vgg16"}));
  std::string algorithm = "ring";
  app.add_option("--algorithm", algorithm, "the all-reduce every codec runs over: ring (default) or hierarchical")
      ->check(CLI::IsMember({"ring", "hierarchical"}));
  app.add_option("--codecs", codecs, "the codecs timed against fp32 (default: all)")
      ->check(CLI::IsMember(compressed_codecs))
      ->delimiter(',');
  return examples::parse_and_run(app, argc, argv, "compression", [&](strata::mpi::context& ctx) {
    if (quick) {
      models = {"resnet50"};
      rounds = 2;
    }
    for (const auto& m : models) {
      if (algorithm == "ring") run_model<Ring>(ctx, m, rounds, codecs, "Ring");
      else run_model<Hierarchical>(ctx, m, rounds, codecs, "Hierarchical");
    }
    return 0;
  });
}
