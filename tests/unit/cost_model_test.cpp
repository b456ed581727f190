// The cost model and the automatic strategy on synthetic calibrations: the model reproduces
// what was measured where it was measured, carries it to other clusters by each algorithm's
// shape, and the choices flip where they should (small tensors -> Tree, sparse tables -> the
// parameter server or the all-gather by touched fraction and ranks, a slow link ->
// compression or Hierarchical). Calibration files round-trip and a foreign one is refused.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "strata/plan/auto_strategy.hpp"
#include "strata/plan/calibrate.hpp"
#include "strata/plan/calibration.hpp"
#include "strata/plan/cost_model.hpp"

using namespace strata;
using namespace strata::plan;

namespace {

constexpr double alpha = 5e-6, beta = 5e9;  // within a host: 5 us, 5 GB/s

/// Measured on 2 ranks of one host: each family's line as its shape gives it at p0 = 2.
calibration synthetic() {
  calibration c;
  c.measured_on = {2, 2};
  c.ranks_per_host = {2};
  c.within_host = {alpha, beta};
  c.ring = {2 * alpha, 1 / beta};  // 2(p0-1) alpha, 2(p0-1)/p0 / beta
  c.hierarchical = c.ring;
  c.native = {4 * alpha, 1 / beta};  // MPI's: twice the ring's latency
  c.tree = {alpha, 1 / beta};        // one round
  c.parameter_server = {50e-6, 1 / 2.5e9};
  c.sparse_parameter_server = {200e-6, 1 / 2.5e9};  // a step's round trips to the servers
  c.sparse_allgather = {20e-6, 1 / beta};
  // 16-bit casts at 2 GB/s of fp32, slower than the host's link: they do not pay within a host.
  const double cast = 1 / 2e9;
  c.ring_fp16 = {2 * alpha, 1 / (2 * beta) + cast};
  c.hierarchical_fp16 = c.ring_fp16;
  c.native_fp16 = {4 * alpha, 1 / (2 * beta) + cast};
  c.tree_fp16 = {alpha, 1 / (2 * beta) + cast};
  c.created = "synthetic";
  return c;
}

variable_profile dense(std::string name, std::size_t rows, std::size_t cols) { return {std::move(name), {rows, cols}}; }

variable_profile table(double touched) { return {"embedding", {1 << 20, 64}, true, touched}; }

strategy_descriptor chosen(const strategy_plan& p, std::size_t i) { return parse_strategy(p.strategies[i]); }

}  // namespace

TEST_CASE("where it was calibrated, the model predicts what was measured", "[plan]") {
  const calibration c = synthetic();
  const cost_model model(c, c.measured_on);
  for (const double bytes : {4e3, 1e6, 64e6}) {
    CHECK(model.allreduce_seconds(collective_kind::ring, codec_kind::none, bytes) == Approx(c.ring(bytes)));
    CHECK(model.allreduce_seconds(collective_kind::tree, codec_kind::none, bytes) == Approx(c.tree(bytes)));
    CHECK(model.allreduce_seconds(collective_kind::native, codec_kind::none, bytes) == Approx(c.native(bytes)));
  }
  // One variable, one bucket: the step is that bucket's all-reduce; on the parameter server,
  // the one-server line.
  const std::vector<variable_profile> one = {dense("w", 1024, 256)};
  CHECK(model.predict(one, std::vector<std::string>{"AllReduce<Ring>"}).total() == Approx(c.ring(one[0].bytes())));
  CHECK(model.predict(one, std::vector<std::string>{"PS<1>"}).total() == Approx(c.parameter_server(one[0].bytes(), 1)));
}

TEST_CASE("between measured sizes the model follows the measured curve", "[plan]") {
  calibration c = synthetic();
  // Cheap per byte up to 1 MB (in cache), dearer beyond.
  c.ring.curve = {{1e4, 20e-6}, {1e6, 0.2e-3}, {64e6, 30e-3}};
  const cost_model model(c, c.measured_on);
  CHECK(model.allreduce_seconds(collective_kind::ring, codec_kind::none, 1e6) == Approx(0.2e-3));
  CHECK(model.allreduce_seconds(collective_kind::ring, codec_kind::none, 32.5e6) == Approx(0.2e-3 + (30e-3 - 0.2e-3) / 2));
  // Below the smallest size: on the way from the fixed cost (10 us) to the first point.
  CHECK(model.allreduce_seconds(collective_kind::ring, codec_kind::none, 1e3) == Approx(10e-6 + (20e-6 - 10e-6) / 10));
  // Carried to 16 ranks, the per-byte rate is the curve's at that size.
  const cost_model sixteen(c, {16, 16});
  const double beta_at = (30e-3 - c.ring.fixed_s) / 64e6;  // at p0 = 2: 2(p0-1)/p0 = 1
  CHECK(sixteen.allreduce_seconds(collective_kind::ring, codec_kind::none, 64e6) ==
        Approx(2 * 15 * alpha + 2.0 * 15 / 16 * 64e6 * beta_at));
}

TEST_CASE("the ring's shape carries a calibration to more ranks and to hosts", "[plan]") {
  const calibration c = synthetic();
  const double n = 64e6;
  const cost_model sixteen(c, {16, 16});
  CHECK(sixteen.allreduce_seconds(collective_kind::ring, codec_kind::none, n) ==
        Approx(2 * 15 * alpha + 2.0 * 15 / 16 * n / beta));
  CHECK(sixteen.allreduce_seconds(collective_kind::tree, codec_kind::none, n) == Approx(4 * (alpha + n / beta)));
  // Two hosts of 8 over a 1 GB/s, 20 us link: the ring crosses it at every step, Hierarchical
  // moves 2(h-1)/h of the bytes over it once.
  const link_class slow{20e-6, 1e9};
  const cost_model hosts(c, {16, 8}, slow);
  CHECK(hosts.allreduce_seconds(collective_kind::ring, codec_kind::none, n) == Approx(2 * 15 * 20e-6 + 2.0 * 15 / 16 * n / 1e9));
  CHECK(hosts.allreduce_seconds(collective_kind::hierarchical, codec_kind::none, n) ==
        Approx(2 * 7 * alpha + 2.0 * 7 / 8 * n / beta + 2 * 20e-6 + n / 1e9));
}

TEST_CASE("a bucket whose gradients are ready early hides behind the rest of backward", "[plan]") {
  const cost_model model(synthetic(), {8, 8});
  std::vector<variable_profile> v = {dense("w", 1024, 1024)};
  const std::vector<std::string> ring = {"AllReduce<Ring>"};
  const double exposed = model.predict(v, ring).total();
  v[0].compute_after_s = exposed / 2;
  CHECK(model.predict(v, ring).total() == Approx(exposed / 2));
  v[0].compute_after_s = 1.0;
  CHECK(model.predict(v, ring).total() == 0.0);
}

TEST_CASE("16-bit compression costs what its calibration measured, and its casts stay as ranks grow", "[plan]") {
  const calibration c = synthetic();
  const cost_model two(c, c.measured_on), sixteen(c, {16, 16});
  for (const double bytes : {4e3, 1e6, 64e6}) {
    CHECK(two.allreduce_seconds(collective_kind::ring, codec_kind::fp16, bytes) == Approx(c.ring_fp16(bytes)));
    CHECK(two.allreduce_seconds(collective_kind::tree, codec_kind::bf16, bytes) == Approx(c.tree_fp16(bytes)));
    // On 16 ranks: the casts measured on 2, and the ring's shape for half the bytes.
    const double casts = bytes / 2e9;
    CHECK(sixteen.allreduce_seconds(collective_kind::ring, codec_kind::fp16, bytes) ==
          Approx(casts + sixteen.allreduce_seconds(collective_kind::ring, codec_kind::none, bytes / 2)));
  }
  CHECK_THROWS_WITH(two.allreduce_seconds(collective_kind::ring, codec_kind::topk, 1e6), Catch::Contains("TopK and PowerSGD"));
}

TEST_CASE("a partitioned part that is many blocks of memory costs per block", "[plan]") {
  calibration c = synthetic();
  c.per_block_s = 1e-6;
  const cost_model model(c, c.measured_on);
  const std::vector<variable_profile> v = {dense("w", 1024, 8)};
  const double rows = model.predict(v, std::vector<std::string>{"AllReduce<Ring>,Partition<0>"}).total();
  const double columns = model.predict(v, std::vector<std::string>{"AllReduce<Ring>,Partition<1>"}).total();
  // Two parts of 1024 rows each: 2 x 1023 blocks beyond each part's first.
  CHECK(columns - rows == Approx(2 * 1023 * 1e-6));
}

TEST_CASE("small tensors go to Tree, large ones to the ring", "[plan]") {
  const cost_model model(synthetic(), {16, 16});
  const auto_options exact{.compression = {}, .allow_parameter_server = false};
  const std::vector<variable_profile> small = {dense("bias.0", 1, 256), dense("bias.1", 1, 256)};
  const strategy_plan s = auto_strategy(small, model, exact);
  CHECK(chosen(s, 0).collective == collective_kind::tree);
  CHECK(chosen(s, 1).collective == collective_kind::tree);
  const std::vector<variable_profile> large = {dense("fc.weight", 4096, 4096)};
  const strategy_plan l = auto_strategy(large, model, exact);
  CHECK(chosen(l, 0).collective == collective_kind::ring);
  CHECK(l.predicted.total() <= l.choices[0].alternatives.front().second);
  // Both in one model: the plan mixes, and beats both uniform plans.
  std::vector<variable_profile> mixed = large;
  mixed.insert(mixed.end(), small.begin(), small.end());
  const strategy_plan m = auto_strategy(mixed, model, exact);
  CHECK(chosen(m, 0).collective == collective_kind::ring);
  CHECK(m.predicted.total() <= m.uniform.front().predicted_s);
}

TEST_CASE("a sparse table goes to the parameter server or the all-gather by touched fraction and ranks", "[plan]") {
  const cost_model eight(synthetic(), {8, 8});
  // 1 MiB of rows touched per rank: seven ranks' rows to all-gather cost more than shards.
  const double many = (1 << 20) / (double(1 << 20) * 64 * 4);
  CHECK(chosen(auto_strategy(std::vector{table(many)}, eight), 0).placement == placement_kind::ps);
  // A few rows: the all-gather's small latency wins over the servers' requests.
  const double few = 4.0 / (1 << 20);
  CHECK(chosen(auto_strategy(std::vector{table(few)}, eight), 0).placement == placement_kind::replicate);
  // The same 1 MiB on 2 ranks: one other rank's rows are cheaper to gather than a server's work.
  const cost_model two(synthetic(), {2, 2});
  CHECK(chosen(auto_strategy(std::vector{table(many)}, two), 0).placement == placement_kind::replicate);
  // On the server, a busy table is spread over as many shards as there are ranks.
  CHECK(chosen(auto_strategy(std::vector{table(many)}, eight), 0).ps_shards == 8);
}

TEST_CASE("a slow link between hosts brings in compression or Hierarchical", "[plan]") {
  const std::vector<variable_profile> v = {dense("fc.weight", 4096, 4096)};
  const auto_options no_ps{.allow_parameter_server = false};
  const strategy_plan one_host = auto_strategy(v, cost_model(synthetic(), {16, 16}), no_ps);
  CHECK(chosen(one_host, 0).codec == codec_kind::none);
  CHECK(chosen(one_host, 0).collective == collective_kind::ring);
  const strategy_plan slow = auto_strategy(v, cost_model(synthetic(), {16, 8}, link_class{20e-6, 1e9}), no_ps);
  const strategy_descriptor d = chosen(slow, 0);
  CHECK((d.codec != codec_kind::none || d.collective == collective_kind::hierarchical));
  CHECK(slow.predicted.total() < slow.uniform.back().predicted_s);
}

TEST_CASE("the plan's table names each choice and what it beat", "[plan]") {
  const std::vector<variable_profile> v = {dense("fc.weight", 4096, 4096), table(0.01)};
  const strategy_plan p = auto_strategy(v, cost_model(synthetic(), {8, 8}));
  const std::string text = describe(p, v);
  CHECK_THAT(text, Catch::Contains("predicted synchronization per step"));
  CHECK_THAT(text, Catch::Contains(p.strategies[0]));
  CHECK_THAT(text, Catch::Contains(p.strategies[1]));
  CHECK_THAT(text, Catch::Contains(p.choices[0].alternatives.front().first));
  for (const std::string& s : p.strategies) CHECK(to_string(parse_strategy(s)) == s);  // canonical
  // Trials: the automatic plan first, then distinct uniform plans, predicted best first.
  const std::vector<scored_plan> trials = trial_candidates(p, 3);
  REQUIRE(trials.size() == 3);
  CHECK(trials[0].strategies == p.strategies);
  CHECK(trials[1].strategies != trials[0].strategies);
  CHECK(trials[1].predicted_s <= trials[2].predicted_s);
}

TEST_CASE("a calibration file round-trips, and a foreign one is refused with the difference", "[plan]") {
  const std::filesystem::path file = std::filesystem::temp_directory_path() / "strata_calibration_test.json";
  const calibration c = synthetic();
  save(c, file);
  const calibration back = load(file);
  CHECK(back.ring.fixed_s == c.ring.fixed_s);
  CHECK(back.sparse_allgather.per_byte_s == c.sparse_allgather.per_byte_s);
  CHECK(back.hierarchical_fp16.per_byte_s == c.hierarchical_fp16.per_byte_s);
  CHECK(back.per_block_s == c.per_block_s);
  CHECK(back.measured_on == c.measured_on);
  CHECK_NOTHROW(back.check_matches({2, 2}, std::vector{2}));
  CHECK_THROWS_WITH(back.check_matches({4, 4}, std::vector{4}), Catch::Contains("on 2 ranks, and this job has 4"));
  CHECK_THROWS_WITH(back.check_matches({2, 1}, std::vector{1, 1}),
                    Catch::Contains("with ranks per host [2], and this job has [1, 1]"));
  CHECK_THROWS_WITH(back.check_matches({2, 2}, std::vector{2}, "nccl"), Catch::Contains("on the mpi backend"));
  std::filesystem::remove(file);
  CHECK_THROWS_WITH(load(file), Catch::Contains("make one with strata-calibrate"));
}

TEST_CASE("a damaged calibration file is refused, naming the field and what it must be", "[plan]") {
  const std::filesystem::path file = std::filesystem::temp_directory_path() / "strata_damaged_calibration.json";
  save(synthetic(), file);
  const nlohmann::json good = nlohmann::json::parse(std::ifstream(file));
  auto write_text = [&](const std::string& text) { std::ofstream(file, std::ios::trunc) << text; };
  auto changed = [&](auto&& change) {
    nlohmann::json j = good;
    change(j);
    return j.dump();
  };
  const std::string text = good.dump();
  const std::vector<std::pair<std::string, std::string>> cases = {  // file contents, what the refusal says
      {changed([](auto& j) { j["allreduce"]["ring"]["fixed_s"] = -1e-5; }),
       "field \"allreduce.ring.fixed_s\" must be a finite number >= 0, not -1e-05"},
      {changed([](auto& j) { j["ranks"] = 0; }), "field \"ranks\" must be a whole number in [2, 16777216], not number 0"},
      {changed([](auto& j) { j["allreduce"]["native"]["curve"] = {{1024.0, 1e-5}, {1024.0, 2e-5}}; }),
       "field \"allreduce.native.curve[1]\" has 1024 bytes, not more than the point before it"},
      {changed([](auto& j) { j["within_host"]["latency_s"] = "fast"; }),
       "field \"within_host.latency_s\" must be a number, not string \"fast\""},
      {changed([](auto& j) { j.erase("per_block_s"); }), "field \"per_block_s\" is missing"},
      {changed([](auto& j) { j["sparse_allgather"]["curve"] = {{1.0, 2.0, 3.0}}; }),
       "field \"sparse_allgather.curve[0]\" must be [bytes, seconds]"},
      {changed([](auto& j) { j["ranks_per_host"] = {3}; }), "field \"ranks_per_host\" adds up to 3 ranks, but \"ranks\" says 2"},
      {changed([](auto& j) { j["parameter_server_sharing"] = nullptr; }),
       "field \"parameter_server_sharing\" must be a number, not null"},
      {changed([](auto& j) { j["format"] = 3; }), "a calibration file of format 3"},
      {changed([](auto& j) { j["backend"] = 7; }), "field \"backend\" must be a string, not number 7"},
      {text.substr(0, text.size() / 2), "is not JSON (byte"},
      {"{\"format\": NaN}", "is not JSON (byte"},
      {"{\"format\": 1e400}", "holds a number out of range"},
      {"\xff\xfe\x00garbage", "is not JSON (byte"},
  };
  for (const auto& [contents, says] : cases) {
    write_text(contents);
    CAPTURE(says);
    try {
      load(file);
      FAIL("accepted");
    } catch (const usage_error& e) {
      const std::string message = e.what();
      CHECK_THAT(message, Catch::Contains(says));
      CHECK_THAT(message, Catch::Contains(file.string()));
      CHECK(message.find('\xff') == std::string::npos);  // a damaged file's bytes are not echoed
    }
  }
  std::filesystem::remove(file);
  std::filesystem::create_directories(file);
  CHECK_THROWS_WITH(load(file), Catch::Contains("is a folder"));
  std::filesystem::remove(file);
  write_text(good.dump());
  CHECK_NOTHROW(load(file));  // the refusals above are the damage's doing
  std::filesystem::remove(file);
}

TEST_CASE("a calibration that cannot be the links' is called doubtful, with what to change", "[plan]") {
  calibration c = synthetic();
  c.across_hosts = {20e-6, 1.25e9};  // 2 hosts at 10 Gbit/s: a host's own link is faster
  CHECK(doubts(c).empty());
  CHECK(describe(c).find("doubtful") == std::string::npos);

  // As measured on 2 x 2 ranks over 2 cores with OpenMPI spinning: 1.9 ms within a host.
  c.within_host = {1.9e-3, 1.4e9};
  REQUIRE(doubts(c).size() == 1);
  CHECK(doubts(c)[0].find("mpi_yield_when_idle") != std::string::npos);
  CHECK(describe(c).find("doubtful: a message within a host took over twice as long (1900.0 us) as across hosts "
                         "(20.0 us)") != std::string::npos);
  c.within_host = {30e-6, 1.4e9};  // slower than across, as noise may make it: not called doubtful
  CHECK(doubts(c).empty());

  // 8 MiB no slower than 8 bytes: the rate is 8 MiB over the floor of 1 ns.
  c.within_host = {1.9e-3, 8.388608e15};
  CHECK(doubts(c).size() == 2);
  c.across_hosts = {};  // one host: nothing across to compare with
  REQUIRE(doubts(c).size() == 1);
  CHECK(doubts(c)[0].find("within a host, 8 MiB took hardly longer than 8 bytes") == 0);

  // One rank per host: within_host is the link's copy, and a bad rate is told once.
  c.ranks_per_host = {1, 1};
  c.across_hosts = c.within_host = {20e-6, 8.388608e15};
  REQUIRE(doubts(c).size() == 1);
  CHECK(doubts(c)[0].find("across hosts") == 0);
}

TEST_CASE("rank 0 measures the links with the first rank of its host and of another host", "[plan]") {
  const std::vector<int> two_by_two = {0, 0, 2, 2}, alternating = {0, 1, 0, 1};
  const std::vector<int> one_host = {0, 0}, one_per_host = {0, 1};
  CHECK(partners_of_rank0(two_by_two).same_host == 1);
  CHECK(partners_of_rank0(two_by_two).other_host == 2);
  CHECK(partners_of_rank0(alternating).same_host == 2);
  CHECK(partners_of_rank0(alternating).other_host == 1);
  CHECK(partners_of_rank0(one_host).other_host == -1);
  CHECK(partners_of_rank0(one_per_host).same_host == -1);
  CHECK(partners_of_rank0(std::vector<int>{0}).same_host == -1);
}

TEST_CASE("a fitted line separates per-row from per-byte costs, and drops terms that would be negative", "[plan]") {
  // 5 us + 0.3 us per row + 2 GB/s, measured at two row widths.
  std::vector<double> rows, bytes, seconds;
  for (const double width : {256.0, 4.0})
    for (const double n : {64.0, 1024.0, 8192.0}) {
      rows.push_back(n);
      bytes.push_back(n * width);
      seconds.push_back(5e-6 + 0.3e-6 * n + n * width / 2e9);
    }
  const line l = line::fit(rows, bytes, seconds);
  CHECK(l.fixed_s == Approx(5e-6).epsilon(1e-6));
  CHECK(l.per_row_s == Approx(0.3e-6).epsilon(1e-6));
  CHECK(l.per_byte_s == Approx(1 / 2e9).epsilon(1e-6));
  // Times that fall as rows grow: no negative per-row cost, the best non-negative line instead.
  const line flat = line::fit(std::vector{1.0, 2.0, 3.0}, std::vector{0.0, 0.0, 0.0}, std::vector{3e-3, 2e-3, 1e-3});
  CHECK(flat.per_row_s == 0.0);
  CHECK(flat.fixed_s > 0.0);
}

TEST_CASE("a fitted line keeps a small fixed cost under large sizes", "[plan]") {
  // 20 us + 5 GB/s: at 16 MiB the fixed cost is 0.6% of the time, yet it is recovered.
  const std::vector<double> bytes = {16e3, 256e3, 4e6, 16e6};
  std::vector<double> seconds;
  for (double b : bytes) seconds.push_back(20e-6 + b / 5e9);
  const line l = line::fit(bytes, seconds);
  CHECK(l.fixed_s == Approx(20e-6).epsilon(1e-6));
  CHECK(l.per_byte_s == Approx(1 / 5e9).epsilon(1e-6));
  // Noise that would make the intercept negative gives a line through the origin instead.
  const line through = line::fit(std::vector{1e6, 2e6}, std::vector{1e-3, 2.5e-3});
  CHECK(through.fixed_s == 0.0);
  CHECK(through.per_byte_s > 0.0);
}

TEST_CASE("a measured curve is by bytes, averages equal sizes and never falls", "[plan]") {
  const std::vector<double> bytes = {4e6, 1e3, 5e5, 5e5, 6e4}, seconds = {20e-3, 1e-5, 3e-4, 5e-4, 5e-4};
  const std::vector<std::pair<double, double>> curve = line::monotone_curve(bytes, seconds);
  REQUIRE(curve.size() == 4);
  CHECK(curve[0] == std::pair{1e3, 1e-5});
  CHECK(curve[1] == std::pair{6e4, 5e-4});
  CHECK(curve[2].first == 5e5);
  CHECK(curve[2].second == Approx(5e-4));  // the mean 4e-4 lifted to what fewer bytes cost
  CHECK(curve[3] == std::pair{4e6, 20e-3});
  // A sparse family: its rows at the per-row rate, its bytes along the curve between sizes.
  line sparse{.fixed_s = 0.0, .per_byte_s = 1e-9, .per_row_s = 1e-7, .curve = curve};
  CHECK(sparse.sparse_at(2.25e6, 100) == Approx(100 * 1e-7 + (5e-4 + 20e-3) / 2));
  // Below the smallest size: on the way from the fixed cost to it, never free.
  sparse.fixed_s = 2e-6;
  CHECK(sparse.at(500) == Approx(2e-6 + (1e-5 - 2e-6) / 2));
}

TEST_CASE("a server slows by how busy the other servers are beside it", "[plan]") {
  CHECK(other_servers_busy(std::vector{4.0, 0.0, 0.0}) == 0.0);
  CHECK(other_servers_busy(std::vector{4.0, 4.0, 4.0}) == 1.0);
  CHECK(other_servers_busy(std::vector{1.0, 4.0, 2.0}) == Approx(3.0 / 8));
  CHECK(other_servers_busy(std::vector{5.0}) == 0.0);
  calibration c = synthetic();
  const std::vector<variable_profile> v = {table(0.01)};
  const std::vector<std::string> one{"PS<1>,SparseRows"}, both{"PS<2>,Partition<0>,SparseRows"};
  const double alone_one = cost_model(c, c.measured_on).predict(v, one).total();
  const double alone_both = cost_model(c, c.measured_on).predict(v, both).total();
  c.sparse_parameter_server_sharing = 1.0;  // two busy servers on the calibrated ranks: each twice as slow
  const cost_model shared(c, c.measured_on);
  CHECK(shared.predict(v, one).total() == Approx(alone_one));  // the other server idles
  const double fixed = c.sparse_parameter_server.fixed_s;
  CHECK(shared.predict(v, both).total() - fixed == Approx(2 * (alone_both - fixed)));
}

TEST_CASE("parameter servers on one host share its link", "[plan]") {
  // 2 hosts x 2 ranks; a dense 4 MiB variable in 2 or 4 shards: either way each host serves
  // half of it, and its link carries that half from the other host's two workers. Four
  // servers cut no link time; what the link's rate adds is its bytes, twice (push, reply).
  const std::vector<variable_profile> v = {dense("fc.weight", 1024, 1024)};
  const double bytes = v[0].bytes();
  const link_class slow{20e-6, 1e8}, fast{20e-6, 1e10};
  for (const std::string s : {"PS<2>,Partition<0>", "PS<4>,Partition<0>"}) {
    const std::vector<std::string> strategies{s};
    const auto step = [&](link_class across) {
      return cost_model(synthetic(), {4, 2}, across).predict(v, strategies).total();
    };
    const double link_time = step(slow) - step(fast);
    INFO(s);
    CHECK(link_time == Approx(2 * bytes * (1 / slow.bytes_per_s - 1 / fast.bytes_per_s)));
  }
  // On one host no byte crosses a link.
  const std::vector<std::string> four{"PS<4>,Partition<0>"};
  CHECK(cost_model(synthetic(), {4, 4}, slow).predict(v, four).total() ==
        Approx(cost_model(synthetic(), {4, 4}, fast).predict(v, four).total()));
}

TEST_CASE("a calibration taken across hosts is not charged its link twice", "[plan]") {
  // Measured on 2 hosts x 2 ranks: the one-server line's bytes hold the two remote workers'
  // bytes on the link, in and back; the all-gather's the remote ranks' rows, once.
  calibration c = synthetic();
  c.measured_on = {4, 2};
  c.ranks_per_host = {2, 2};
  c.across_hosts = {20e-6, 1e8};
  const double link = 1 / c.across_hosts.bytes_per_s;
  c.parameter_server = {50e-6, 1 / 1e9 + 2 * 2 * link, 3e-6};  // above 4 ranks' bytes moved once within a host
  c.sparse_allgather = {20e-6, 4 / beta + 2 * link, 0.5e-6};   // above 3 ranks' rows moved once within a host
  const std::vector<variable_profile> one = {dense("w", 1024, 256)}, rows = {table(0.01)};
  const std::vector<std::string> server{"PS<1>"}, gather{"Replicate,SparseRows"};
  const double bytes = one[0].bytes(), touched = rows[0].touched_bytes(), touched_rows = rows[0].touched_rows();
  // Where it was calibrated, the model predicts what was measured.
  const cost_model model(c, c.measured_on);
  CHECK(model.predict(one, server).total() == Approx(c.parameter_server(bytes, 1)));
  CHECK(model.predict(rows, gather).total() == Approx(c.sparse_allgather(touched, touched_rows)));
  // On one host of 4 ranks the same calibration predicts the work alone.
  const cost_model one_host(c, {4, 4});
  CHECK(one_host.predict(one, server).total() == Approx(c.parameter_server.fixed_s + bytes / 1e9 + 3e-6));
  CHECK(one_host.predict(rows, gather).total() == Approx(20e-6 + touched * 4 / beta + 0.5e-6 * touched_rows));
  // Where the link hid the work, it costs at least the ranks' bytes moved once within a host.
  c.parameter_server = {50e-6, 2 * 2 * link, 3e-6};
  c.sparse_allgather = {20e-6, 2 * link, 0.5e-6};
  CHECK(cost_model(c, {4, 4}).predict(one, server).total() == Approx(50e-6 + 4 * bytes / beta + 3e-6));
  CHECK(cost_model(c, {4, 4}).predict(rows, gather).total() ==
        Approx(20e-6 + 3 * touched / beta + 0.5e-6 * touched_rows));
  // With one rank per host nothing was measured within a host: the calibrated cluster is
  // still predicted as measured, however little the link left.
  c.measured_on = {2, 1};
  c.ranks_per_host = {1, 1};
  c.within_host = c.across_hosts;
  c.parameter_server = {50e-6, 2 * link, 3e-6};
  CHECK(cost_model(c, c.measured_on).predict(one, server).total() == Approx(c.parameter_server(bytes, 1)));
}
