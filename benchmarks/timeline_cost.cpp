// What STRATA_TIMELINE costs: ResNet-50's gradient synchronization (161 tensors) under
// AllReduce<Ring> (a few buckets: few events per step) and under PS<2>, Partition<0> (a push,
// a pull, a reply, an application and an answer per tensor and shard: hundreds of events per
// step), each with the timeline recording and without, interleaved.
//
//   mpirun -np 2 ./timeline_cost
//
// Off, an event costs one relaxed atomic load, so "off" is the executor as it always runs.
// summary: on_over_off_<model> = median step with recording / median step without.
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <strata/strata.hpp>

#include "executor_model.hpp"
#include "measure.hpp"
#include "model_shapes.hpp"
#include "../examples/common/rank_main.hpp"

int main(int argc, char** argv) {
  using namespace strata;
  bool quick = false;
  int rounds = 15;
  CLI::App app{"The timeline's cost: steps with STRATA_TIMELINE recording and without"};
  app.add_flag("--quick", quick, "few rounds (smoke test)");
  examples::number(app, "--rounds", rounds, 1, 1000, "interleaved rounds (medians are taken over them)");
  return examples::parse_and_run(app, argc, argv, "timeline_cost", [&](strata::mpi::context& ctx) {
    if (quick) rounds = 2;

    const auto shapes = bench::resnet50_shapes();
    bench::expect_size(shapes, 161, 25'557'032);
    bench::executor_model<Strategy<AllReduce<Ring>>, bench::no_update> ring(ctx, shapes, {});
    const optim::sgd sgd{.lr = 1e-6f};
    bench::executor_model<Strategy<PS<2>, Partition<0>>, optim::sgd> ps(ctx, shapes, sgd, {}, 0.5f, 1e-3f);

    // Recording starts paused; each "on" contender resumes it for its own calls only.
    trace::timeline& timeline = trace::timeline::instance();
    const std::filesystem::path file = std::filesystem::temp_directory_path() / "strata_timeline_cost.json";
    if (!timeline.on()) timeline.start(trace::timeline::file_of(file, ctx.rank()), ctx.rank(), ctx.size());
    timeline.set_recording(false);
    auto recorded = [&](auto& model) {
      return [&] {
        timeline.set_recording(true);
        model.step();
        timeline.set_recording(false);
      };
    };
    std::vector<bench::contender> contenders = {{"ring, timeline off", [&] { ring.step(); }},
                                                {"ring, timeline on", recorded(ring)},
                                                {"PS<2>, timeline off", [&] { ps.step(); }},
                                                {"PS<2>, timeline on", recorded(ps)}};
    bench::interleave(contenders, rounds, 2, [&] { ctx.control().barrier(); });
    timeline.set_recording(true);
    const std::filesystem::path written = timeline.write();
    const auto events = std::filesystem::file_size(written);
    std::filesystem::remove(written);

    std::vector<double> ms;
    for (const auto& c : contenders) ms.push_back(1e3 * bench::median(c.seconds));
    if (ctx.rank() == 0) {
      fmt::print("ResNet-50 (161 tensors) on {} ranks, medians of {} rounds of 2 steps; rank 0's trace: {:.1f} KiB\n",
                 ctx.size(), rounds, static_cast<double>(events) / 1024);
      for (std::size_t i = 0; i < contenders.size(); ++i) fmt::print("  {:<22} {:8.2f} ms\n", contenders[i].name, ms[i]);
      fmt::print("summary: ranks={} on_over_off_ring={:.3f} on_over_off_ps={:.3f} (median step with the timeline recording "
                 "over without)\n",
                 ctx.size(), ms[1] / ms[0], ms[3] / ms[2]);
    }
    return 0;
  });
}
