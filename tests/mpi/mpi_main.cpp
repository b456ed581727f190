// Catch2 under MPI: every rank runs the same cases; the job fails if any rank fails, and
// only rank 0 prints the report (the others print their failures only).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "strata/comm/mpi/mpi.hpp"

namespace strata::testing {
mpi::context* context = nullptr;
}

int main(int argc, char** argv) {
  strata::mpi::context ctx(argc, argv);
  strata::testing::context = &ctx;
  Catch::Session session;
  if (ctx.rank() != 0) session.configData().reporterName = "compact";
  int failed = session.run(argc, argv);
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, ctx.control().native_handle());
  return failed == 0 ? 0 : 1;
}
