// The communicator operations beyond the all-reduce, on the loopback backend: allgather,
// and split with group-relative ranks and traffic isolated from the parent's.
#include <catch2/catch.hpp>

#include "conformance/cases.hpp"

using namespace strata;

TEMPLATE_TEST_CASE("allgather collects every rank's block in rank order", "[communicator]", float, double, std::byte,
                   std::int32_t) {
  for (int ranks = 1; ranks <= 4; ++ranks) {
    INFO("ranks = " << ranks);
    CHECK_NOTHROW(loopback::run(ranks, [](auto& ctx) { conformance::allgather_collects_every_rank<TestType>(ctx); }));
  }
}

TEST_CASE("split forms groups with group-relative ranks", "[communicator]") {
  for (int ranks = 1; ranks <= 5; ++ranks) {
    INFO("ranks = " << ranks);
    CHECK_NOTHROW(loopback::run(ranks, [](auto& ctx) { conformance::split_forms_groups(ctx); }));
  }
}

TEST_CASE("split communicators never receive their parent's or a sibling's messages", "[communicator]") {
  for (int ranks = 1; ranks <= 3; ++ranks) {
    INFO("ranks = " << ranks);
    CHECK_NOTHROW(loopback::run(ranks, [](auto& ctx) { conformance::split_isolates_traffic(ctx); }));
  }
}

TEST_CASE("split orders equal keys by rank, and a ring runs on the group", "[communicator]") {
  CHECK_NOTHROW(loopback::run(5, [](auto& ctx) {
    auto& comm = ctx.collectives();
    const int color = comm.rank() % 2;
    auto group = comm.split(color, 0);  // equal keys: the parent's order
    conformance::expect(group.rank() == comm.rank() / 2, "rank {}: group rank {}", comm.rank(), group.rank());
    std::vector<float> data(100, static_cast<float>(comm.rank()));
    sync::ring_workspace<loopback::communicator, float> work;
    sync::ring_allreduce(group, sync::span_list<float>({std::span<float>(data)}), 1.0f, work, {7, 2});
    const float expected = color == 0 ? 0 + 2 + 4 : 1 + 3;
    conformance::expect(std::ranges::all_of(data, [&](float x) { return x == expected; }), "rank {}: group sum {}",
                        comm.rank(), data[0]);
  }));
}
