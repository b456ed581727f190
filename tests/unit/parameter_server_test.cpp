// The parameter server on loopback ranks: placement, push/pull over uneven shards,
// server-side optimizers, sparse rows, BSP against all-reduce, the SSP bound and its
// checker, and the errors of bad requests and silent servers.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <numeric>
#include <random>

#include <catch2/catch.hpp>

#include "conformance/ps_cases.hpp"

using namespace strata;

TEST_CASE("shards are placed greedily on the least-loaded rank", "[ps][plan]") {
  std::vector<float> a(100), b(60), c(8), ga(100), gb(60), gc(8);
  const std::vector<variable_binding> variables = {
      {"a", {10, 10}, a, ga, "PS<2>,Partition<0>"},   // 2 x 200 bytes
      {"b", {6, 10}, b, gb, "PS<3>,Partition<0>"},    // 3 x 80 bytes
      {"c", {8}, c, gc, "Replicate,AllReduce<Ring>"},  // not on the servers
  };
  const sync::ps::plan p = sync::ps::make_plan(variables, 3);
  REQUIRE(p.variables.size() == 2);
  // a.0 -> rank 0 (all empty), a.1 -> rank 1, then every part of b (80 bytes each) to rank 2
  // while it stays the least loaded: 0 < 200, 80 < 200, 160 < 200.
  const std::vector<int> hosts = {p.variables[0].shards[0].host, p.variables[0].shards[1].host, p.variables[1].shards[0].host,
                                  p.variables[1].shards[1].host, p.variables[1].shards[2].host};
  CHECK(hosts == std::vector<int>{0, 1, 2, 2, 2});
  CHECK(p.bytes_per_rank == std::vector<std::size_t>{200, 200, 240});
  CHECK(p.variables[1].shards[2].first_row == 4);
  CHECK(p.variables[1].shard_of_row(5) == 2);
}

TEST_CASE("hosts given as any ids are numbered in order of their first rank, with their ranks counted", "[ps][plan]") {
  const std::vector<int> colors = {7, 7, 2, 7, 2, 9};
  const host_numbering hosts = number_hosts(colors);
  CHECK(hosts.host_of_rank == std::vector<std::size_t>{0, 0, 1, 0, 1, 2});
  CHECK(hosts.ranks_on_host == std::vector<std::size_t>{3, 2, 1});
  CHECK(number_hosts({}).ranks_on_host.empty());
}

TEST_CASE("shards are spread over hosts first, by bytes per rank, then over a host's ranks", "[ps][plan]") {
  std::vector<float> a(100), b(40), ga(100), gb(40);
  const std::vector<variable_binding> variables = {{"a", {10, 10}, a, ga, "PS<2>,Partition<0>"},   // 2 x 200 bytes
                                                   {"b", {4, 10}, b, gb, "PS<2>,Partition<0>"}};  // 2 x 80 bytes
  const auto hosts_of = [](const sync::ps::plan& p) {
    std::vector<int> hosts;
    for (const auto& v : p.variables)
      for (const auto& s : v.shards) hosts.push_back(s.host);
    return hosts;
  };
  // 2 hosts x 2 ranks: a.0 -> rank 0; a.1 -> host 1 (0 bytes), rank 2; b.0 -> the hosts tie at
  // 200, so the emptiest rank, 1; b.1 -> host 1 (200 < 280), rank 3.
  const std::vector<int> two_hosts = {0, 0, 1, 1};
  const sync::ps::plan spread = sync::ps::make_plan(variables, 4, server_assignment::least_loaded, two_hosts);
  CHECK(hosts_of(spread) == std::vector<int>{0, 2, 1, 3});
  CHECK(spread.bytes_per_rank == std::vector<std::size_t>{200, 80, 200, 80});
  // Hosts come as node colors, any numbers: only which ranks share one counts.
  const std::vector<int> colors = {5, 5, 2, 2};
  CHECK(hosts_of(sync::ps::make_plan(variables, 4, server_assignment::least_loaded, colors)) ==
        std::vector<int>{0, 2, 1, 3});
  // Hosts of unequal size are balanced by bytes per rank. With 1 rank on host 0 and 3 on host
  // 1, four shards of 40 bytes go one to each rank. Balanced by bytes per host, rank 0 took two
  // (0, 1, 2, 0), and the busiest link carried 3 x 80 bytes one way, where now it is 3 x 40.
  std::vector<float> c(40), gc(40);
  const std::vector<variable_binding> four_shards = {{"c", {4, 10}, c, gc, "PS<4>,Partition<0>"}};
  const std::vector<int> one_and_three = {0, 1, 1, 1};
  const sync::ps::plan uneven = sync::ps::make_plan(four_shards, 4, server_assignment::least_loaded, one_and_three);
  CHECK(hosts_of(uneven) == std::vector<int>{0, 1, 2, 3});
  CHECK(uneven.bytes_per_rank == std::vector<std::size_t>{40, 40, 40, 40});
  // On one host, rank by rank, as before; a host layout of another size is refused.
  CHECK(hosts_of(sync::ps::make_plan(variables, 4)) == std::vector<int>{0, 1, 2, 3});
  CHECK_THROWS_AS(sync::ps::make_plan(variables, 3, server_assignment::least_loaded, two_hosts), usage_error);
}

TEST_CASE("the ordered placement picks what a pass over every rank picks", "[ps][plan]") {
  // The rule, as a pass over the ranks: the least bytes per rank on its host (compared
  // crosswise), then the least bytes on the rank, then the lower rank.
  std::mt19937 random(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int ranks = 1 + static_cast<int>(random() % 24);
    std::vector<int> host_of(static_cast<std::size_t>(ranks));
    const int hosts = 1 + static_cast<int>(random() % 5);
    for (int& h : host_of) h = static_cast<int>(random() % static_cast<unsigned>(hosts)) * 10;  // host ids, not numbers
    sync::ps::server_placement placement(ranks, server_assignment::least_loaded, host_of);
    std::vector<std::size_t> rank_bytes(static_cast<std::size_t>(ranks)), host_bytes(placement.ranks_on_host().size());
    for (int shard = 0; shard < 60; ++shard) {
      const std::size_t bytes = random() % 4 == 0 ? 64 : 4 * (1 + random() % 1000);  // ties are common
      std::size_t expected = 0;
      for (std::size_t r = 1; r < rank_bytes.size(); ++r) {
        const std::size_t hr = placement.host_of(r), he = placement.host_of(expected);
        const std::size_t load_r = host_bytes[hr] * placement.ranks_on_host()[he];
        const std::size_t load_e = host_bytes[he] * placement.ranks_on_host()[hr];
        if (load_r != load_e ? load_r < load_e : rank_bytes[r] < rank_bytes[expected]) expected = r;
      }
      const std::size_t chosen = placement.place(bytes);
      REQUIRE(chosen == expected);
      rank_bytes[chosen] += bytes;
      host_bytes[placement.host_of(chosen)] += bytes;
    }
    CHECK(placement.bytes_per_rank() == rank_bytes);
  }
}

TEST_CASE("builder::PS's first_server assignment puts every shard on rank 0", "[ps][plan]") {
  std::vector<float> a(100), b(60), ga(100), gb(60);
  const std::vector<variable_binding> variables = {{"a", {10, 10}, a, ga, "PS<2>,Partition<0>"},
                                                   {"b", {6, 10}, b, gb, "PS<3>,Partition<0>"}};
  const sync::ps::plan p = sync::ps::make_plan(variables, 3, builder::PS<>::servers);
  for (const auto& v : p.variables)
    for (const auto& s : v.shards) CHECK(s.host == 0);
  CHECK(p.bytes_per_rank == std::vector<std::size_t>{640, 0, 0});
}

TEST_CASE("PS variables' optimizer state is sharded over the servers, replicated variables' is not", "[ps][memory]") {
  for (int ranks : {1, 2, 3, 4})
    for (server_assignment servers : {server_assignment::least_loaded, server_assignment::first_server})
      CHECK_NOTHROW(loopback::run(ranks, [&](loopback::context& ctx) { conformance::ps_optimizer_state_is_sharded(ctx, servers); }));
}

TEST_CASE("repeated rows are combined in input order", "[ps][sparse]") {
  sync::row_sums sums(2);
  sums.add(std::vector<std::uint32_t>{5, 1, 5, 5}, std::vector<float>{1, 2, 10, 20, 100, 200, 1000, 2000});
  CHECK(std::ranges::equal(sums.rows(), std::vector<std::uint32_t>{5, 1}));  // in order of first appearance
  CHECK(std::ranges::equal(sums.sums(), std::vector<float>{1101, 2202, 10, 20}));
  CHECK(std::ranges::equal(sums.slots_by_row(), std::vector<std::uint32_t>{1, 0}));
  sums.add(std::vector<std::uint32_t>{1}, std::vector<float>{0.5f, 0.25f});  // a second micro-batch adds
  CHECK(std::ranges::equal(sums.sum(1), std::vector<float>{10.5f, 20.25f}));
  sums.clear();
  CHECK(sums.empty());
}

TEST_CASE("combined rows are summed in input order, bit for bit, through every growth of the index", "[ps][sparse]") {
  std::mt19937 random(11);
  sync::row_sums sums(3);
  for (const std::size_t entries : {1u, 40u, 5000u, 300u}) {  // grows, then reused after clear()
    std::uniform_int_distribution<std::uint32_t> row(0, static_cast<std::uint32_t>(entries));
    std::normal_distribution<float> value(0.0f, 1.0f);
    std::vector<std::uint32_t> rows(entries);
    std::vector<float> values(3 * entries);
    for (auto& r : rows) r = row(random) == 0 ? 0xffff'ffffu : row(random);  // the largest row too
    for (auto& v : values) v = value(random);
    std::map<std::uint32_t, std::vector<float>> expected;  // a row's sum, from 0.0f in input order
    for (std::size_t i = 0; i < rows.size(); ++i) {
      auto& sum = expected.try_emplace(rows[i], 3, 0.0f).first->second;
      for (std::size_t j = 0; j < 3; ++j) sum[j] += values[3 * i + j];
    }
    sums.clear();
    sums.add(rows, values);
    REQUIRE(sums.size() == expected.size());
    for (std::size_t slot = 0; slot < sums.size(); ++slot)
      CHECK(std::ranges::equal(sums.sum(slot), expected.at(sums.rows()[slot])));
    std::vector<std::uint32_t> by_row;
    for (const std::uint32_t slot : sums.slots_by_row()) by_row.push_back(sums.rows()[slot]);
    CHECK(std::ranges::is_sorted(by_row));
  }
}

TEST_CASE("rows are ordered stably by the radix sort, for tables of every size", "[ps][sparse]") {
  std::mt19937 random(7);
  // Largest rows of 0, 11, 22 and 32 bits: zero to three passes.
  for (const std::uint32_t largest : {0u, 2047u, (1u << 22) - 1, 0xffff'ffffu}) {
    std::uniform_int_distribution<std::uint32_t> row(0, largest);
    std::vector<std::uint32_t> rows(5000);
    for (auto& r : rows) r = row(random) % (largest / 64 + 1) * 64;  // many repeats
    rows.push_back(largest);
    std::vector<std::uint32_t> expected(rows.size());
    std::iota(expected.begin(), expected.end(), 0u);
    std::ranges::stable_sort(expected, {}, [&](std::uint32_t i) { return rows[i]; });
    CHECK(sync::positions_by_row(rows) == expected);
    std::vector<std::uint32_t> unique = rows;
    std::ranges::sort(unique);
    unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
    CHECK(sync::unique_sorted_rows(rows) == unique);
  }
  CHECK(sync::positions_by_row(std::vector<std::uint32_t>{}).empty());
}

TEST_CASE("a gradient given with the ids a pull indexed sums as one given afresh, bit for bit", "[ps][sparse]") {
  std::mt19937 engine(7);
  std::uniform_int_distribution<std::uint32_t> row(0, 40);
  std::normal_distribution<float> value(0.0f, 1.0f);
  std::vector<std::uint32_t> ids(300);
  std::vector<float> values(ids.size() * 3);
  for (auto& id : ids) id = row(engine);
  for (auto& v : values) v = value(engine);
  values[4] = -0.0f;  // a row's first value of -0: 0.0f + -0.0f is +0, both ways
  ids[1] = ids[0];

  sync::row_sums fresh(3), known(3);
  fresh.add(ids, values);
  sync::indexed_ids pulled;
  pulled.index(ids);
  std::vector<std::uint32_t> unique = ids;
  std::ranges::sort(unique);
  unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
  CHECK(pulled.sorted_rows() == unique);
  CHECK(pulled.holds(ids));
  known.add_indexed(pulled, values);
  CHECK_FALSE(pulled.holds(ids));  // given up to the sums: used once
  CHECK(std::ranges::equal(known.rows(), fresh.rows()));
  CHECK(std::ranges::equal(known.slots_by_row(), fresh.slots_by_row()));
  CHECK(std::memcmp(known.sums().data(), fresh.sums().data(), fresh.sums().size_bytes()) == 0);

  // A second micro-batch adds as add() does, and the order by row is computed again.
  const std::vector<std::uint32_t> more = {41, 2};
  const std::vector<float> more_values = {1, 2, 3, 4, 5, 6};
  known.add(more, more_values);
  fresh.add(more, more_values);
  CHECK(std::ranges::equal(known.slots_by_row(), fresh.slots_by_row()));
  CHECK(std::memcmp(known.sums().data(), fresh.sums().data(), fresh.sums().size_bytes()) == 0);

  // Other ids are not taken for the indexed ones.
  pulled.index(ids);
  std::vector<std::uint32_t> changed = ids;
  changed[7] = 41;
  CHECK_FALSE(pulled.holds(changed));
}

TEST_CASE("dense push and pull over uneven shards", "[ps]") {
  for (int ranks : {1, 2, 4}) CHECK_NOTHROW(loopback::run(ranks, conformance::ps_push_pull_uneven_shards<loopback::context>));
}

TEST_CASE("server-side optimizers match the optimizer applied locally to the mean gradient", "[ps][optimizer]") {
  for (int ranks : {2, 3}) {
    CHECK_NOTHROW(loopback::run(ranks, [](loopback::context& ctx) {
      conformance::ps_server_optimizer_matches_reference(ctx, optim::adam{.lr = 0.01f});
    }));
    CHECK_NOTHROW(loopback::run(ranks, [](loopback::context& ctx) {
      conformance::ps_server_optimizer_matches_reference(ctx, optim::adagrad{.lr = 0.1f});
    }));
    CHECK_NOTHROW(loopback::run(ranks, [](loopback::context& ctx) {
      conformance::ps_server_optimizer_matches_reference(ctx, optim::sgd{.lr = 0.1f, .momentum = 0.9f});
    }));
  }
}

TEST_CASE("sparse rows: duplicates add, untouched rows stay, ranks are averaged", "[ps][sparse]") {
  for (int ranks : {1, 2, 4}) {
    CHECK_NOTHROW(loopback::run(ranks, conformance::sparse_rows_combine_duplicates<conformance::PSSparse, loopback::context>));
    CHECK_NOTHROW(loopback::run(
        ranks, conformance::sparse_rows_combine_duplicates<Strategy<AllReduce<Ring>, SparseRows>, loopback::context>));
  }
}

TEST_CASE("a BSP server merges pushes that overlap, are disjoint or empty, row by row", "[ps][sparse][bsp]") {
  for (int ranks : {2, 3, 4}) CHECK_NOTHROW(loopback::run(ranks, conformance::sparse_bsp_pushes_merge_by_row<loopback::context>));
}

TEST_CASE("sparse pushes posted without pulls between them all arrive, in order", "[ps][sparse]") {
  for (int ranks : {1, 2, 3})
    CHECK_NOTHROW(loopback::run(ranks, [](loopback::context& ctx) {
      conformance::sparse_pushes_without_pulls_all_arrive<conformance::PSSparse>(ctx);
    }));
}

TEST_CASE("dense_and_sparse: Adam for dense variables, Adagrad for sparse ones, on servers and replicas", "[ps][optimizer]") {
  for (int ranks : {1, 3}) CHECK_NOTHROW(loopback::run(ranks, conformance::dense_and_sparse_optimizers_by_variable<loopback::context>));
}

TEST_CASE("replicated sparse rows: bad rows and sizes are refused, accumulation averages micro-batches", "[sparse]") {
  // Catch's assertions are for the test's own thread: ranks report through conformance::expect.
  CHECK_NOTHROW(loopback::run(2, [](loopback::context& ctx) {
    using conformance::expect;
    std::vector<float> table(4 * 2, 0.0f);
    auto m = make_model(variable<Strategy<AllReduce<Ring>, SparseRows>>("emb", table, {}, {4, 2}));
    auto exec = make_executor(ctx, m, optim::sgd{.lr = 1.0f}, executor_options{.accumulation_steps = 2});
    const variable_id emb{0};
    auto refused = [&](std::vector<std::uint32_t> rows, std::vector<float> values, std::string_view because) {
      try {
        exec.sparse_gradient(emb, rows, values);
      } catch (const binding_error& e) {
        expect(std::string_view(e.what()).find(because) != std::string_view::npos, "refused with \"{}\"", e.what());
        return;
      }
      expect(false, "not refused; expected: {}", because);
    };
    refused({4}, {1, 1}, "row 4 (position 0) is out of range; the variable has 4 rows");
    refused({1}, {1}, "1 rows of 2 values need 2 values, got 1");
    // Two micro-batches on each of two ranks: row 1 gets 2 + 6 per rank, so the mean over
    // 2 ranks x 2 micro-batches is 4; row 3 only from rank 1's second micro-batch: 8 / 4.
    exec.sparse_gradient(emb, std::vector<std::uint32_t>{1}, std::vector<float>{2, 2});
    expect(!exec.step().updated, "the first of two micro-batches updated");
    std::vector<std::uint32_t> rows = {1};
    std::vector<float> values = {6, 6};
    if (ctx.collectives().rank() == 1) {
      rows.push_back(3);
      values.insert(values.end(), {8, 8});
    }
    exec.sparse_gradient(emb, rows, values);
    expect(exec.step().updated, "the second of two micro-batches did not update");
    expect(table == std::vector<float>{0, 0, -4, -4, 0, 0, -2, -2}, "table is [{}]", fmt::join(table, ", "));
  }));
}

TEST_CASE("PS under BSP trains like all-reduce", "[ps][bsp]") {
  for (int ranks : {2, 4}) CHECK_NOTHROW(loopback::run(ranks, conformance::ps_bsp_equals_allreduce<loopback::context>));
}

TEST_CASE("every SSP read is within its staleness bound, under random delays", "[ps][ssp]") {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    INFO("seed " << seed);
    std::atomic<std::uint64_t> lag{0};
    CHECK_NOTHROW(loopback::run(4, [&](loopback::context& ctx) {
      const std::uint64_t mine = conformance::ssp_bound_holds<2>(ctx, seed, 40);
      std::uint64_t seen = lag.load();
      while (mine > seen && !lag.compare_exchange_weak(seen, mine)) {}
    }));
    CHECK(lag.load() <= 2);
    CHECK(lag.load() >= 1);  // the delays did let ranks drift apart: the bound was exercised
  }
  // BSP reads are SSP<0> reads: the checker must accept them too.
  CHECK_NOTHROW(loopback::run(3, [](loopback::context& ctx) {
    conformance::staleness_bound_holds<conformance::PSSparse, 0>(ctx, 5, 20);
  }));
}

TEST_CASE("PS gradient accumulation updates as one batch of the micro-batches' mean", "[ps][accumulation]") {
  for (int ranks : {1, 3}) CHECK_NOTHROW(loopback::run(ranks, conformance::ps_accumulation_equals_mean<loopback::context>));
}

TEST_CASE("a worker blocked by SSP sleeps instead of spinning", "[ps][ssp]") {
  std::atomic<double> share{1.0};
  CHECK_NOTHROW(loopback::run(3, [&](loopback::context& ctx) {
    const double mine = conformance::blocked_worker_cpu_share(ctx);
    if (ctx.collectives().rank() == 0) share = mine;
  }));
  CHECK(share.load() < 0.1);
}

TEST_CASE("the SSP checker rejects a worker S+1 clocks ahead", "[ps][ssp]") {
  // Rank 0 reads at clock 10; rank 1 has 7 pushes applied: 3 behind.
  const sync::ps::read_record read{"emb", 0, 0, 10, {10, 7}};
  CHECK_FALSE(sync::ps::staleness_violation(read, 3).has_value());
  const auto violation = sync::ps::staleness_violation(read, 2);
  REQUIRE(violation.has_value());
  CHECK_THAT(*violation, Catch::Contains("reflects 7 pushes of rank 1, fewer than the 8 that SSP<2> requires"));
  // The reader's own pushes must all be reflected, whatever the staleness.
  CHECK(sync::ps::staleness_violation({"emb", 0, 1, 10, {10, 9}}, 5).has_value());
}

TEST_CASE("bad parameter-server requests are refused with the variable's name", "[ps][errors]") {
  CHECK_THROWS_WITH(loopback::run(2,
                                  [](loopback::context& ctx) {
                                    std::vector<float> table(10 * 2);
                                    auto m = make_model(variable<conformance::PSSparse>("emb", table, {}, {10, 2}));
                                    auto exec = make_executor(ctx, m, optim::sgd{});
                                    exec.pull(variable_id{0}, std::vector<std::uint32_t>{3, 10});
                                  }),
                    Catch::Contains("pull(\"emb\"): row 10 (position 1) is out of range; the variable has 10 rows"));
  CHECK_THROWS_WITH(loopback::run(1,
                                  [](loopback::context& ctx) {
                                    std::vector<float> table(10 * 2);
                                    auto m = make_model(variable<conformance::PSSparse>("emb", table, {}, {10, 2}));
                                    auto exec = make_executor(ctx, m, optim::sgd{});
                                    exec.sparse_gradient(variable_id{0}, std::vector<std::uint32_t>{1}, std::vector<float>{1});
                                  }),
                    Catch::Contains("sparse_gradient(\"emb\"): 1 rows of 2 values need 2 values, got 1"));
  CHECK_THROWS_WITH(loopback::run(1,
                                  [](loopback::context& ctx) {
                                    std::vector<float> w(4), g(4);
                                    auto m = make_model(variable<Strategy<AllReduce<Ring>>>("w", w, g, {4}));
                                    auto exec = make_executor(ctx, m, optim::sgd{});
                                    exec.pull(variable_id{0}, std::vector<std::uint32_t>{0});
                                  }),
                    Catch::Contains("pull(\"w\"): the variable's strategy Replicate,AllReduce<Ring> has no SparseRows; "
                                    "pull and sparse_gradient are for sparse tables"));
}

TEST_CASE("two PS executors alive on one context each keep to their own servers", "[ps]") {
  for (int ranks : {2, 3}) {
    CHECK_NOTHROW(loopback::run(ranks, [](loopback::context& ctx) {
      std::vector<float> a(6, 0.0f), ga(6, 1.0f), b(6, 0.0f), gb(6, 2.0f);
      auto first_model = make_model(variable<Strategy<PS<2>, Partition<0>>>("a", a, ga, {6}));
      auto second_model = make_model(variable<Strategy<PS<1>>>("b", b, gb, {6}));
      auto first = make_executor(ctx, first_model, optim::sgd{.lr = 0.5f});
      auto second = make_executor(ctx, second_model, optim::sgd{.lr = 0.25f});
      for (int u = 1; u <= 3; ++u) {
        first.step();
        second.step();
        for (std::size_t i = 0; i < a.size(); ++i) {
          conformance::expect(a[i] == -0.5f * static_cast<float>(u), "update {}: a[{}] = {}", u, i, a[i]);
          conformance::expect(b[i] == -0.5f * static_cast<float>(u), "update {}: b[{}] = {}", u, i, b[i]);
        }
      }
    }));  // both shut down while the other is still alive
  }
}

TEST_CASE("a worker that stops pushing is named in a timeout, not a hang", "[ps][timeout]") {
  CHECK_THROWS_WITH(loopback::run(3,
                                  [](loopback::context& ctx) {
                                    std::vector<float> w(30), g(30, 1.0f);
                                    auto m = make_model(variable<Strategy<PS<3>, Partition<0>>>("w", w, g, {3, 10}));
                                    auto exec = make_executor(ctx, m, optim::sgd{}, {.timeout = std::chrono::milliseconds(300)});
                                    exec.step();
                                    if (ctx.rank() != 2) exec.step();  // rank 2 stops: BSP pulls cannot be answered
                                  }),
                    Catch::Contains("update 2, in the wait for the parameter server on ranks 0, 1, 2 to answer for \"w\" shard 0") && Catch::Contains("rank 2 did not reach this step"));
}
