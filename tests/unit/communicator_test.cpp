// The communicator operations beyond the all-reduce, on the loopback backend: allgather,
// split with group-relative ranks and traffic isolated from the parent's, receives matched
// in the order they were posted; the pace of waits that test.
#include <chrono>
#include <climits>
#include <span>
#include <thread>

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

TEST_CASE("loopback receives match in the order they were posted, and complete in any order", "[communicator]") {
  CHECK_NOTHROW(loopback::run(2, [](auto& ctx) {
    auto& comm = ctx.collectives();
    constexpr int data = 7, later = 8, go = 9;
    const auto send = [&](float value, int tag) {
      auto r = comm.isend(std::span<const float>(&value, 1), 1 - comm.rank(), tag);
      comm.wait(r);
    };
    if (comm.rank() == 0) {
      float first = 0, second = 0, dropped = 0, kept = 0;
      auto a = comm.irecv(std::span<float>(&first, 1), 1, data);
      auto b = comm.irecv(std::span<float>(&second, 1), 1, data);
      conformance::expect(!comm.test(b) && !comm.test(a), "a receive completed before its message was sent");
      { auto taken_back = comm.irecv(std::span<float>(&dropped, 1), 1, later); }
      send(0.0f, go);
      comm.wait(b);  // the later receive first: it still gets the second message
      comm.wait(a);
      conformance::expect(first == 1.0f && second == 2.0f, "receives got {} and {}, expected 1 and 2", first, second);
      while (!comm.iprobe(1, later)) std::this_thread::yield();  // waits for the next receive
      auto c = comm.irecv(std::span<float>(&kept, 1), 1, later);
      comm.wait(c);
      conformance::expect(dropped == 0.0f && kept == 3.0f, "a receive taken back got {}; the next one {}, expected 3",
                          dropped, kept);
    } else {
      float token = 0;
      auto g = comm.irecv(std::span<float>(&token, 1), 0, go);
      comm.wait(g);
      send(1.0f, data);
      send(2.0f, data);
      send(3.0f, later);
    }
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
