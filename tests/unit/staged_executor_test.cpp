// The staged executor on loopback ranks, with host_stage: host strategies through a stage
// train as they do on host buffers, SSP reads stay within their bound and land in the
// stage, and checkpoints restore into it. The GPU test runs the same cases through
// cuda::pinned_stage.
#include <catch2/catch.hpp>

#include "conformance/staged_cases.hpp"
#include "conformance/temporary_folder.hpp"

using namespace strata;

TEST_CASE("a staged executor trains as the host executor on host buffers", "[staged]") {
  for (int ranks : {1, 2, 3})
    CHECK_NOTHROW(loopback::run(ranks, [](loopback::context& ctx) {
      conformance::staged_equals_direct(ctx, host_stage{}, conformance::host_memory());
    }));
}

TEST_CASE("SSP through a stage reads within its bound and copies what it read", "[staged][ps]") {
  for (int ranks : {2, 4})
    CHECK_NOTHROW(loopback::run(ranks, [](loopback::context& ctx) {
      conformance::staged_ssp_reads_within_bound<1>(ctx, host_stage{}, conformance::host_memory(), 3, 24);
    }));
}

TEST_CASE("a staged checkpoint restores into the stage's memory", "[staged][checkpoint]") {
  const conformance::temporary_folder folder;
  CHECK_NOTHROW(loopback::run(2, [&](loopback::context& ctx) {
    conformance::staged_checkpoint_restores_stage(ctx, host_stage{}, conformance::host_memory(), folder.path);
  }));
}
