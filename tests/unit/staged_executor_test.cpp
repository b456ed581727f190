// The staged executor on loopback ranks, with host_stage: host strategies through a stage
// train as they do on host buffers, SSP reads stay within their bound and land in the
// stage, and checkpoints restore into it. The GPU test runs the same cases through
// cuda::pinned_stage.
#include <algorithm>
#include <limits>

#include <catch2/catch.hpp>

#include "conformance/staged_cases.hpp"
#include "conformance/temporary_folder.hpp"

using namespace strata;

TEST_CASE("a staged executor trains as the host executor on host buffers", "[staged]") {
  for (int ranks : {1, 2, 3})
    CHECK_NOTHROW(loopback::run(ranks, [](loopback::context& ctx) {
      conformance::staged_equals_direct(ctx, host_stage{}, conformance::host_buffers());
    }));
}

TEST_CASE("SSP through a stage reads within its bound and copies what it read", "[staged][ps]") {
  for (int ranks : {2, 4})
    CHECK_NOTHROW(loopback::run(ranks, [](loopback::context& ctx) {
      conformance::staged_ssp_reads_within_bound<1>(ctx, host_stage{}, conformance::host_buffers(), 3, 24);
    }));
}

TEST_CASE("a staged checkpoint restores into the stage's memory", "[staged][checkpoint]") {
  const conformance::temporary_folder folder;
  CHECK_NOTHROW(loopback::run(2, [&](loopback::context& ctx) {
    conformance::staged_checkpoint_restores_stage(ctx, host_stage{}, conformance::host_buffers(), folder.path);
  }));
}

TEST_CASE("a step the NaN/Inf guard stops still copies the pulled parameters to the stage", "[staged][reliability]") {
  for (auto policy : {sync::nonfinite_policy::skip_step, sync::nonfinite_policy::raise}) {
    CHECK_NOTHROW(loopback::run(1, [policy](loopback::context& ctx) {
      const conformance::stage_memory<host_stage> memory = conformance::host_buffers();
      const std::span<float> w = memory(4), gw = memory(4), b = memory(2), gb = memory(2);
      std::ranges::fill(b, 1.0f);
      executor_options options;
      options.compression.on_nonfinite = policy;
      auto staged = make_staged_executor(ctx, host_stage{}, optim::sgd{.lr = 1.0f}, options,
                                         variable<Strategy<PS<1>>>("w", w, gw, {4}),
                                         variable<Strategy<AllReduce<Ring>, Compress<FP16>>>("b", b, gb, {2}));
      std::ranges::fill(gw, 1.0f);
      gb[1] = std::numeric_limits<float>::quiet_NaN();
      if (policy == sync::nonfinite_policy::skip_step) {
        const step_stats s = staged.step();
        conformance::expect(s.skipped && !s.updated, "the NaN gradient did not skip the update");
      } else {
        bool raised = false;
        try {
          staged.step();
        } catch (const numeric_error&) {
          raised = true;
        }
        conformance::expect(raised, "the NaN gradient did not raise numeric_error");
      }
      // The server applied w's push before the guard stopped b's update.
      conformance::expect(w[0] == -1.0f && b[0] == 1.0f, "the stage holds w[0] = {}, b[0] = {}; expected -1 and 1", w[0],
                          b[0]);
    }));
  }
}
