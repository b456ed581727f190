// The loopback conformance cases, now across real processes.
#include <catch2/catch.hpp>

#include "conformance/cases.hpp"

namespace strata::testing {
extern mpi::context* context;
}

using namespace strata;
using testing::context;

TEMPLATE_TEST_CASE("mpi: all-reduce sums exactly", "[mpi][allreduce]", float, double) {
  CHECK_NOTHROW(conformance::allreduce_sums_exactly<Ring, TestType>(*context));
  CHECK_NOTHROW(conformance::allreduce_sums_exactly<Native, TestType>(*context));
}

TEST_CASE("mpi: all-reduce averages a bucket of several buffers", "[mpi][allreduce]") {
  CHECK_NOTHROW(conformance::allreduce_averages_buffer_lists<Ring>(*context));
  CHECK_NOTHROW(conformance::allreduce_averages_buffer_lists<Native>(*context));
}

TEST_CASE("mpi: replicas stay bitwise identical", "[mpi][executor]") {
  CHECK_NOTHROW(conformance::replicas_stay_bitwise_identical<Ring>(*context));
  CHECK_NOTHROW(conformance::replicas_stay_bitwise_identical<Native>(*context));
}

TEST_CASE("mpi: the executor averages gradients", "[mpi][executor]") {
  CHECK_NOTHROW(conformance::executor_averages_gradients<Ring>(*context));
  CHECK_NOTHROW(conformance::executor_averages_gradients<Native>(*context));
}

TEST_CASE("mpi: the context reports ranks and local ranks", "[mpi]") {
  CHECK(context->size() >= 1);
  CHECK(context->local_size() == context->size());  // one machine
  CHECK(context->local_rank() == context->rank());
  CHECK(context->collectives().native_handle() != context->control().native_handle());
}
