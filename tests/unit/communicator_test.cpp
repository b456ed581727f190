// The communicator operations beyond the all-reduce, on the loopback backend: allgather,
// and split with group-relative ranks and traffic isolated from the parent's; the pace of
// waits that test.
#include <chrono>
#include <climits>

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

TEST_CASE("a collective's waits yield on one machine and nap across a network", "[communicator][pacing]") {
  struct across_machines {
    bool spans_machines() const { return true; }
  };
  pace here{};
  loopback::run(1, [&](auto& ctx) { here = collective_pace(ctx.collectives()); });
  const pace there = collective_pace(across_machines{});
  CHECK(here.tests == there.tests);
  CHECK(here.yields == INT_MAX);  // every rest a yield
  CHECK(there.yields == 0);       // every rest a sleep
  CHECK(there.first_sleep == there.longest_sleep);
}

TEST_CASE("a backoff tests, yields, then sleeps doubling to its limit, and starts over on reset",
          "[communicator][pacing]") {
  using namespace std::chrono;
  const pace schedule{.tests = 3, .yields = 2, .first_sleep = milliseconds(2), .longest_sleep = milliseconds(4),
                      .busy_sleep = milliseconds(4)};
  backoff idle(schedule);
  auto timed = [&] {
    const auto start = steady_clock::now();
    idle.pause();
    return steady_clock::now() - start;
  };
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    for (int k = 0; k < schedule.tests + schedule.yields; ++k) timed();  // no sleep (not timed: a yield may wait)
    CHECK(timed() >= milliseconds(2));
    CHECK(timed() >= milliseconds(4));
    CHECK(timed() >= milliseconds(4));
    CHECK(timed() >= milliseconds(4));
    CHECK(timed() < milliseconds(32));  // 4 ms, where doubling without a limit would sleep 32
    idle.reset();
  }
}
