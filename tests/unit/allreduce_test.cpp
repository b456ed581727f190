// All-reduce algorithms on the loopback backend: exact sums for awkward sizes, float and
// double, 1 to 5 ranks (Hierarchical: several node layouts).
#include <catch2/catch.hpp>

#include "conformance/cases.hpp"

using namespace strata;

namespace {

struct node_layout {
  int ranks, ranks_per_node;  // 0: one node (loopback's node_color)
};
// One node, one rank per node, and several nodes of several ranks.
const std::vector<node_layout> node_layouts = {{1, 0}, {2, 2}, {2, 1}, {3, 0}, {3, 1}, {4, 2},
                                               {4, 1}, {5, 0}, {5, 1}, {6, 2}, {6, 3}};

}  // namespace

TEMPLATE_TEST_CASE("all-reduce sums exactly on every rank count", "[allreduce]", float, double) {
  for (int ranks = 1; ranks <= 5; ++ranks) {
    INFO("ranks = " << ranks);
    CHECK_NOTHROW(loopback::run(ranks, [](auto& ctx) { conformance::allreduce_sums_exactly<Ring, TestType>(ctx); }));
    CHECK_NOTHROW(  // the ring's chunks as messages, not through shared memory
        loopback::run(ranks, [](auto& ctx) { conformance::allreduce_sums_exactly<Ring, TestType>(ctx, 0, false); }));
    CHECK_NOTHROW(loopback::run(ranks, [](auto& ctx) { conformance::allreduce_sums_exactly<Native, TestType>(ctx); }));
    CHECK_NOTHROW(loopback::run(ranks, [](auto& ctx) { conformance::allreduce_sums_exactly<Tree, TestType>(ctx); }));
  }
}

TEMPLATE_TEST_CASE("hierarchical all-reduce sums exactly on every node layout", "[allreduce]", float, double) {
  for (const node_layout& layout : node_layouts) {
    INFO("ranks = " << layout.ranks << ", ranks_per_node = " << layout.ranks_per_node);
    for (bool shared : {true, false})
      CHECK_NOTHROW(loopback::run(layout.ranks, [&](auto& ctx) {
        conformance::allreduce_sums_exactly<Hierarchical, TestType>(ctx, layout.ranks_per_node, shared);
      }));
    CHECK_NOTHROW(loopback::run(layout.ranks, [&](auto& ctx) {  // the node's ranks reading each other's memory
      conformance::allreduce_sums_exactly<Hierarchical, TestType>(ctx, layout.ranks_per_node, false, true);
    }));
  }
}

TEST_CASE("all-reduce averages a bucket of several buffers in place", "[allreduce]") {
  for (int ranks = 1; ranks <= 4; ++ranks) {
    INFO("ranks = " << ranks);
    CHECK_NOTHROW(loopback::run(ranks, [](auto& ctx) { conformance::allreduce_averages_buffer_lists<Ring>(ctx); }));
    CHECK_NOTHROW(loopback::run(
        ranks, [](auto& ctx) { conformance::allreduce_averages_buffer_lists<Ring>(ctx, 0, {3, 0, 17, 1, 0, 64, 2}, false); }));
    CHECK_NOTHROW(loopback::run(ranks, [](auto& ctx) { conformance::allreduce_averages_buffer_lists<Native>(ctx); }));
    CHECK_NOTHROW(loopback::run(ranks, [](auto& ctx) { conformance::allreduce_averages_buffer_lists<Tree>(ctx); }));
  }
  for (const node_layout& layout : node_layouts) {
    INFO("ranks = " << layout.ranks << ", ranks_per_node = " << layout.ranks_per_node);
    CHECK_NOTHROW(loopback::run(layout.ranks, [&](auto& ctx) {
      conformance::allreduce_averages_buffer_lists<Hierarchical>(ctx, layout.ranks_per_node);
    }));
  }
}

TEST_CASE("a finely cut bucket is reduced through one contiguous copy, to the same sums", "[allreduce]") {
  // A tensor partitioned along an inner axis is one block per outer index: 3000 blocks of
  // 0-2 elements, which the ring would otherwise send as a message each.
  std::vector<std::size_t> sizes;
  for (std::size_t i = 0; i < 3000; ++i) sizes.push_back(i % 3);
  for (int ranks = 2; ranks <= 3; ++ranks) {
    INFO("ranks = " << ranks);
    CHECK_NOTHROW(loopback::run(ranks, [&](auto& ctx) { conformance::allreduce_averages_buffer_lists<Ring>(ctx, 0, sizes); }));
  }
  // Hierarchical's two ring phases (reduce-scatter, all-gather) stage it too.
  CHECK_NOTHROW(
      loopback::run(4, [&](auto& ctx) { conformance::allreduce_averages_buffer_lists<Hierarchical>(ctx, 2, sizes); }));
  std::vector<float> memory(6000);
  std::vector<std::span<float>> blocks;  // every other element: blocks that follow each other would be joined
  for (std::size_t i = 0; i < 3000; ++i) blocks.emplace_back(memory.data() + 2 * i, 1);
  CHECK(sync::fragmented(sync::span_list<float>(blocks)));
  CHECK_FALSE(sync::fragmented(sync::span_list<float>({std::span<float>(memory)})));
}

TEST_CASE("hierarchical result equals flat result", "[allreduce]") {
  for (const node_layout& layout : node_layouts) {
    INFO("ranks = " << layout.ranks << ", ranks_per_node = " << layout.ranks_per_node);
    CHECK_NOTHROW(loopback::run(layout.ranks, [&](auto& ctx) {
      conformance::allreduce_agrees_with_ring<Hierarchical>(
          ctx, {.ring_chunk_bytes = 256,
                .ranks_per_node = layout.ranks_per_node,
                .cross_node_chunk_bytes = 96,
                .hierarchical_piece_bytes = 4096});
    }));
  }
}

TEST_CASE("tree result equals flat result", "[allreduce]") {
  for (int ranks = 1; ranks <= 6; ++ranks) {
    INFO("ranks = " << ranks);
    CHECK_NOTHROW(loopback::run(ranks, [](auto& ctx) { conformance::allreduce_agrees_with_ring<Tree>(ctx, {}); }));
  }
}

TEST_CASE("hierarchical all-reduce rejects nodes of different sizes", "[allreduce]") {
  CHECK_THROWS_WITH(loopback::run(3, [](auto& ctx) { conformance::allreduce_sums_exactly<Hierarchical, float>(ctx, 2); }),
                    Catch::Contains("same number of ranks on every node, but node 0 has 2, node 1 has 1"));
}

TEST_CASE("the ring's reduce-scatter leaves each rank its share, and the all-gather spreads them", "[allreduce]") {
  loopback::run(3, [](auto& ctx) {
    auto& comm = ctx.collectives();
    std::vector<float> data = conformance::contribution<float>(1001, comm.rank());
    const sync::span_list<float> bucket({std::span<float>(data)});
    sync::ring_workspace<loopback::communicator, float> work;
    sync::ring_reduce_scatter(comm, bucket, work, {7, 2});
    const sync::segment share = sync::ring_owned_segment(data.size(), comm.size(), comm.rank());
    for (std::size_t i = share.begin; i < share.begin + share.size; ++i)
      conformance::expect(data[i] == conformance::expected_sum<float>(i, 3), "rank {}: element {} of its share",
                          comm.rank(), i);
    sync::ring_allgather(comm, bucket, work, {7, 2});
    for (std::size_t i = 0; i < data.size(); ++i)
      conformance::expect(data[i] == conformance::expected_sum<float>(i, 3), "rank {}: element {}", comm.rank(), i);
  });
}

TEST_CASE("rings of any shape follow each other on one communicator, through shared memory or not", "[allreduce]") {
  for (int ranks = 2; ranks <= 4; ++ranks) {
    INFO("ranks = " << ranks);
    CHECK_NOTHROW(loopback::run(ranks, [](auto& ctx) { conformance::rings_of_any_shape_follow_each_other(ctx); }));
  }
}

TEST_CASE("a failing rank releases a ring waiting on shared memory", "[allreduce]") {
  CHECK_THROWS_WITH(loopback::run(3,
                                  [](auto& ctx) {
                                    auto& comm = ctx.collectives();
                                    std::vector<float> data(1000, 1.0f);
                                    sync::ring_workspace<loopback::communicator, float> work;
                                    const sync::span_list<float> bucket({std::span<float>(data)});
                                    sync::ring_allreduce(comm, bucket, 1.0f, work, {64, 2});  // maps the slots
                                    if (ctx.rank() == 1) throw std::runtime_error("rank 1 broke");
                                    sync::ring_allreduce(comm, bucket, 1.0f, work, {64, 2});
                                  }),
                    "rank 1 broke");
}

TEST_CASE("span_list visits the pieces covering a range", "[allreduce]") {
  std::vector<int> a(3), b(0), c(4);
  const sync::span_list<int> list({std::span<int>(a), std::span<int>(b), std::span<int>(c)});
  std::vector<std::pair<std::size_t, std::size_t>> seen;  // (offset, size)
  list.for_each(2, 4, [&](std::size_t offset, std::span<int> s) { seen.emplace_back(offset, s.size()); });
  CHECK(list.size() == 7);
  CHECK(seen == std::vector<std::pair<std::size_t, std::size_t>>{{0, 1}, {1, 3}});
}

TEST_CASE("span_list joins parts that follow each other in memory and leaves out empty ones", "[allreduce]") {
  std::vector<int> memory(10), apart(3);
  const std::span<int> all(memory);
  const sync::span_list<int> list(
      {all.first(4), all.subspan(4, 0), all.subspan(4, 2), std::span<int>(apart), all.subspan(7, 3)});
  REQUIRE(list.parts().size() == 3);
  CHECK(list.parts()[0].data() == memory.data());
  CHECK(list.parts()[0].size() == 6);
  CHECK(list.parts()[1].data() == apart.data());
  CHECK(list.parts()[2].data() == memory.data() + 7);
  CHECK(list.size() == 12);
  std::vector<std::pair<std::size_t, const int*>> seen;  // (offset, first element)
  list.for_each(5, 5, [&](std::size_t offset, std::span<int> s) { seen.emplace_back(offset, s.data()); });
  CHECK(seen == std::vector<std::pair<std::size_t, const int*>>{{0, memory.data() + 5}, {1, apart.data()}, {4, memory.data() + 7}});
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
    const std::size_t sent = sync::ring_allreduce(comm, sync::span_list<float>({std::span<float>(data)}), 1.0f, work, {256, 3});
    conformance::expect(sent == sync::optimal_allreduce_bytes(16000, 4), "sent {} bytes", sent);
  });
}

TEST_CASE("the tree sends the buffer once per round; the hierarchical ring sends the optimal total", "[allreduce]") {
  loopback::run(6, [](auto& ctx) {
    auto& comm = ctx.collectives();
    std::vector<float> data(6000, 1.0f);
    const sync::span_list<float> bucket({std::span<float>(data)});
    sync::allreduce<Tree, loopback::communicator, float> tree({});
    // 6 = 4 + 2: ranks 0 and 1 also return the result to ranks 4 and 5, which only fold in.
    const std::size_t rounds = comm.rank() < 2 ? 3 : comm.rank() < 4 ? 2 : 1;
    const std::size_t tree_sent = tree(comm, bucket, 1.0f);
    conformance::expect(tree_sent == rounds * 24000, "rank {}: the tree sent {} bytes", comm.rank(), tree_sent);
    // 2/3 of the buffer in each phase within nodes of 3, 1/3 across the 2 nodes: 5/3 in all.
    sync::allreduce<Hierarchical, loopback::communicator, float> hierarchical({.ranks_per_node = 3});
    const std::size_t hierarchical_sent = hierarchical(comm, bucket, 1.0f);
    conformance::expect(hierarchical_sent == sync::optimal_allreduce_bytes(24000, 6),
                        "rank {}: the hierarchical all-reduce sent {} bytes", comm.rank(), hierarchical_sent);
  });
}

TEST_CASE("a rank that fails releases the node's ranks reading each other's memory", "[allreduce]") {
  // After a call that every rank finished, rank 3 fails before the next: its partner waits
  // to learn where its buffer is, node 0's ranks on the ring between nodes. Each gives up
  // with an error instead of waiting. (The buffers outlive the threads: one that gave up
  // would free memory another still reads, where between processes the kernel's read fails.)
  std::vector<std::vector<float>> buffers(4, std::vector<float>(100000, 1.0f));
  CHECK_THROWS_WITH(loopback::run(4,
                                  [&](auto& ctx) {
                                    auto& comm = ctx.collectives();
                                    std::vector<float>& data = buffers[static_cast<std::size_t>(ctx.rank())];
                                    const sync::span_list<float> bucket({std::span<float>(data)});
                                    sync::allreduce<Hierarchical, loopback::communicator, float> reduce(
                                        {.ranks_per_node = 2, .hierarchical_piece_bytes = 4096});
                                    reduce(comm, bucket, 1.0f);
                                    conformance::expect(data[99999] == 4.0f, "rank {}: {}", comm.rank(), data[99999]);
                                    if (ctx.rank() == 3) throw std::runtime_error("rank 3 broke");
                                    reduce(comm, bucket, 1.0f);
                                  }),
                    "rank 3 broke");
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
