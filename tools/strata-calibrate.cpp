// strata-calibrate: measures this job's calibration for the cost model (plan/calibrate.hpp)
// and writes it as JSON; or checks that a calibration file describes this job.
//
//   mpirun -np 4 strata-calibrate --output calibration.json   # a few seconds
//   mpirun -np 4 strata-calibrate --check calibration.json    # exit 64 with the reason if foreign
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <strata/plan/calibrate.hpp>
#include <strata/strata.hpp>

#include "../examples/common/rank_main.hpp"

int main(int argc, char** argv) {
  using namespace strata;
  std::string output, check;
  bool quick = false;
  plan::calibrate_options options;
  CLI::App app{"Measures this job's costs for strata's cost model (automatic strategies) and writes them as JSON"};
  auto* out = app.add_option("--output", output, "write the calibration to this file");
  app.add_option("--check", check, "only check that this calibration describes this job (ranks, hosts, backend)")
      ->excludes(out);
  app.add_flag("--quick", quick, "small sizes and few repeats (a smoke test; the numbers are rough)");
  examples::number(app, "--repeats", options.repeats, 1, 1000, "timed steps per size (medians count)");
  return examples::parse_and_run(app, argc, argv, "strata-calibrate", [&](strata::mpi::context& ctx) {
    if (output.empty() == check.empty()) {
      if (ctx.rank() == 0) std::fputs("strata-calibrate: give --output FILE or --check FILE\n", stderr);
      return static_cast<int>(exit_usage);
    }
    try {
      // Measuring takes a while: the output is checked first.
      if (!output.empty()) require_writable_file(output, "--output");
      if (!check.empty()) {
        plan::load_or_calibrate(ctx, check);  // refuses a calibration of another job
        if (ctx.rank() == 0) fmt::print("{} describes this job ({} ranks)\n", check, ctx.size());
        return 0;
      }
      if (quick) {
        options.repeats = 2;
        options.allreduce_bytes = {16 << 10, 1 << 20};
        options.parameter_server_bytes = {16 << 10, 256 << 10};
        options.sparse_rows_touched = {64, 1024};
      }
      if (ctx.rank() == 0) options.progress = [](const std::string& what) { fmt::print("measuring {}\n", what), std::fflush(stdout); };
      const plan::calibration c = plan::calibrate(ctx, options);
      if (ctx.rank() == 0) {
        plan::save(c, output);
        fmt::print("{}written to {}\n", plan::describe(c), output);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "strata-calibrate: rank %d: %s\n", ctx.rank(), e.what());
      return static_cast<int>(exit_status_of(e));
    }
    return 0;
  });
}
