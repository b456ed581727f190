// All-reduce algorithms on the loopback backend: exact sums for awkward sizes, float and
// double, 1 to 5 ranks.
#include <catch2/catch.hpp>

#include "conformance/cases.hpp"

using namespace strata;

TEMPLATE_TEST_CASE("all-reduce sums exactly on every rank count", "[allreduce]", float, double) {
  for (int ranks = 1; ranks <= 5; ++ranks) {
    INFO("ranks = " << ranks);
    CHECK_NOTHROW(loopback::run(ranks, [](auto& ctx) { conformance::allreduce_sums_exactly<Ring, TestType>(ctx); }));
    CHECK_NOTHROW(loopback::run(ranks, [](auto& ctx) { conformance::allreduce_sums_exactly<Native, TestType>(ctx); }));
  }
}

TEST_CASE("all-reduce averages a bucket of several buffers in place", "[allreduce]") {
  for (int ranks = 1; ranks <= 4; ++ranks) {
    INFO("ranks = " << ranks);
    CHECK_NOTHROW(loopback::run(ranks, conformance::allreduce_averages_buffer_lists<Ring, loopback::context>));
    CHECK_NOTHROW(loopback::run(ranks, conformance::allreduce_averages_buffer_lists<Native, loopback::context>));
  }
}

TEST_CASE("span_list visits the pieces covering a range", "[allreduce]") {
  std::vector<int> a(3), b(0), c(4);
  const sync::span_list<int> list({std::span<int>(a), std::span<int>(b), std::span<int>(c)});
  std::vector<std::pair<std::size_t, std::size_t>> seen;  // (offset, size)
  list.for_each(2, 4, [&](std::size_t offset, std::span<int> s) { seen.emplace_back(offset, s.size()); });
  CHECK(list.size() == 7);
  CHECK(seen == std::vector<std::pair<std::size_t, std::size_t>>{{0, 1}, {1, 3}});
}

TEST_CASE("ring segments cover the buffer without overlap", "[allreduce]") {
  for (std::size_t n : {0u, 1u, 5u, 64u, 1001u})
    for (int p = 1; p <= 5; ++p) {
      std::size_t next = 0;
      for (int i = 0; i < p; ++i) {
        const auto s = sync::ring_segment(n, p, i);
        CHECK(s.begin == next);
        next += s.size;
      }
      CHECK(next == n);
    }
}

TEST_CASE("the ring reports the bandwidth-optimal byte count", "[allreduce]") {
  loopback::run(4, [](auto& ctx) {
    auto& comm = ctx.collectives();
    std::vector<float> data(4000, 1.0f);
    sync::ring_workspace<loopback::communicator, float> work;
    const std::size_t sent = sync::ring_allreduce(comm, sync::span_list<float>({std::span<float>(data)}), 1.0f, work, 256, 3);
    conformance::expect(sent == sync::optimal_allreduce_bytes(16000, 4), "sent {} bytes", sent);
  });
}

TEST_CASE("a failing rank releases the others with an error that names it", "[loopback]") {
  CHECK_THROWS_WITH(loopback::run(3,
                                  [](auto& ctx) {
                                    if (ctx.rank() == 1) throw std::runtime_error("rank 1 broke");
                                    std::vector<float> x(10);
                                    auto r = ctx.collectives().iallreduce_sum(std::span<float>(x));
                                    ctx.collectives().wait(r);
                                  }),
                    "rank 1 broke");
}
