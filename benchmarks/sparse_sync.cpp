// Per-step synchronization of a 1M x 64 fp32 embedding whose batches touch about 1% of the
// rows (Zipf-distributed ids): strata's sparse parameter server (pull the rows a batch
// needs, push their gradient rows, server-side SGD) and strata's replicated sparse rows (an
// all-gather of every rank's touched rows) against a dense all-reduce of the whole table's
// gradient, which is what data parallelism without sparse support (DDP's default)
// does. Interleaved rounds, each timing --steps steps of a contender back to back (a PS
// step's pushes complete while the next one starts, as in training), medians.
// ps_wire_fraction is the time the PS step's bytes (its pulled rows and its pushed gradient
// rows, with their ids) need at the point-to-point bandwidth measured in the same run (8 MiB
// between rank 0 and the first rank on another host, or rank 1 on one host), over the step's
// time; ps_remote_wire_fraction counts only the bytes that cross such a link: across hosts,
// the busiest host's link, which carries out its workers' pushes to servers on other hosts
// and its servers' replies to workers there (and in the reverse); on one host, the busiest
// rank's bytes to and from other ranks' servers.
//
//   mpirun -np 2 ./sparse_sync
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <strata/plan/calibrate.hpp>
#include <strata/strata.hpp>

#include "measure.hpp"
#include "../examples/common/rank_main.hpp"

namespace {

/// Draws ids in [0, n) with P(k) proportional to 1 / (k + 1)^s.
class zipf {
 public:
  zipf(std::size_t n, double s) : cdf_(n) {
    double sum = 0.0;
    for (std::size_t k = 0; k < n; ++k) cdf_[k] = sum += 1.0 / std::pow(static_cast<double>(k + 1), s);
    for (double& c : cdf_) c /= sum;
  }
  std::uint32_t operator()(std::mt19937_64& engine) const {
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(engine);
    return static_cast<std::uint32_t>(std::min<std::size_t>(std::ranges::lower_bound(cdf_, u) - cdf_.begin(), cdf_.size() - 1));
  }

 private:
  std::vector<double> cdf_;
};

/// The rows per step the busiest link carries one way while pushes cross, from every rank's
/// rows per step whose server is on each other host (`remote`, by host), or on one host on
/// each other rank (there: the busiest rank's). While pushes cross, a host's link carries
/// out its workers' rows served on other hosts and in other hosts' workers' rows served on
/// it; the replies cross back the other way, so a step crosses the busier of the two twice.
/// Collective.
template <class C>
double busiest_link_rows(C& comm, const std::vector<double>& remote, bool one_host, const strata::host_numbering& hosts) {
  const std::size_t p = static_cast<std::size_t>(comm.size()), n = remote.size();
  std::vector<double> all(p * n);
  comm.allgather(std::span<const double>(remote), std::span<double>(all));
  double busiest = 0.0;
  if (one_host) {  // each rank's own
    for (std::size_t r = 0; r < p; ++r)
      busiest = std::max(busiest, std::accumulate(all.begin() + r * n, all.begin() + (r + 1) * n, 0.0));
    return busiest;
  }
  for (std::size_t h = 0; h < n; ++h) {
    double out = 0.0, in = 0.0;  // pushes of this host's workers to other hosts, and of other hosts' to it
    for (std::size_t r = 0; r < p; ++r) {
      const double* rows = all.data() + r * n;
      if (hosts.host_of_rank[r] == h) out += std::accumulate(rows, rows + n, 0.0);
      else in += rows[h];
    }
    busiest = std::max({busiest, out, in});
  }
  return busiest;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace strata;
  bool quick = false;
  int rounds = 7, steps = 10;
  std::size_t rows = 1'000'000, width = 64, draws = 12'000;
  double exponent = 1.1;
  CLI::App app{"Sparse embedding synchronization: strata's parameter server vs a dense all-reduce of the table"};
  app.add_flag("--quick", quick, "a small table and few rounds (smoke test)");
  examples::number(app, "--rounds", rounds, 1, 1000, "interleaved rounds (medians are taken over them)");
  examples::number(app, "--steps", steps, 1, 1000, "steps back to back in each round's measurement of a contender");
  examples::number(app, "--rows", rows, std::size_t{1}, std::size_t{100'000'000}, "embedding rows");
  examples::number(app, "--width", width, std::size_t{1}, std::size_t{4096}, "embedding width");
  examples::number(app, "--draws", draws, std::size_t{1}, std::size_t{10'000'000},
                   "ids drawn per rank and step (Zipf; repeats are combined)");
  examples::number(app, "--zipf", exponent, 0.01, 10.0, "Zipf exponent of the ids");
  return examples::parse_and_run(app, argc, argv, "sparse_sync", [&](strata::mpi::context& ctx) {
    if (rows * width > (std::size_t{1} << 30)) {  // 4 GiB of float32 per table, and two tables
      if (ctx.rank() == 0)
        fmt::print(stderr, "sparse_sync: --rows {} x --width {} is {} elements; at most 2^30 (a 4 GiB table) are allowed\n",
                   rows, width, rows * width);
      return static_cast<int>(strata::exit_usage);
    }
    if (quick) {
      rounds = 2;
      steps = 2;
      rows = 20'000;
      draws = 300;
    }

    // The sparse table on the parameter server, 4 row shards placed by the plan.
    using Sparse = Strategy<PS<4>, Partition<0>, SparseRows>;
    strata::host_vector<float> table(rows * width, 0.01f);
    auto sparse_model = make_model(variable<Sparse>("embedding", table, {}, {rows, width}));
    auto ps = make_executor(ctx, sparse_model, optim::sgd{.lr = 0.01f});

    // The same table replicated, its whole gradient all-reduced every step.
    using Dense = Strategy<AllReduce<Ring>>;
    strata::host_vector<float> replica(rows * width, 0.01f), dense_grad(rows * width, 0.0f);
    auto dense_model = make_model(variable<Dense>("embedding", replica, dense_grad, {rows, width}));
    auto dense = make_executor(ctx, dense_model, bench::no_update{});

    // The same table replicated, only the touched rows all-gathered.
    using Gathered = Strategy<AllReduce<Ring>, SparseRows>;
    strata::host_vector<float> gathered_replica(rows * width, 0.01f);
    auto gathered_model = make_model(variable<Gathered>("embedding", gathered_replica, {}, {rows, width}));
    auto gathered = make_executor(ctx, gathered_model, bench::no_update{});

    // The batches are drawn before timing: drawing Zipf ids is the data loader's work.
    const zipf ids(rows, exponent);
    std::mt19937_64 engine(17 + static_cast<std::uint64_t>(ctx.rank()));
    const std::size_t steps_taken = static_cast<std::size_t>(rounds) * static_cast<std::size_t>(steps) + 2;  // + warm-up
    std::vector<std::vector<std::uint32_t>> batches(steps_taken, std::vector<std::uint32_t>(draws));
    // Rows per step, and of them those whose server is across a link: by the ends of the links,
    // hosts, or where the job has one host, ranks (the measured link joins two of them).
    const sync::ps::variable_plan& placed = ps.parameter_server_plan()->variables[0];
    const std::vector<int> hosts = host_of_each_rank(ctx.control());
    const host_numbering numbered = number_hosts(hosts);
    const bool one_host = numbered.ranks_on_host.size() <= 1;
    const auto end_of_link = [&](int rank) {
      const auto r = static_cast<std::size_t>(rank);
      return one_host ? r : numbered.host_of_rank[r];
    };
    const std::size_t mine = end_of_link(ctx.rank());
    std::vector<double> remote(one_host ? static_cast<std::size_t>(ctx.size()) : numbered.ranks_on_host.size(), 0.0);
    double touched = 0.0;
    for (auto& batch : batches) {
      for (auto& id : batch) id = ids(engine);
      std::vector<std::uint32_t> unique = batch;
      std::ranges::sort(unique);
      unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
      touched += static_cast<double>(unique.size()) / static_cast<double>(batches.size());
      for (const std::uint32_t row : unique)
        if (const std::size_t there = end_of_link(placed.shards[placed.shard_of_row(row)].host); there != mine)
          remote[there] += 1.0 / static_cast<double>(batches.size());
    }
    std::vector<float> gradient_rows(draws * width, 0.001f);
    // A PS step pushes the batch's gradient rows, then fetches the rows of the next batch: as
    // fresh as BSP requires, so once every rank's push is applied. A measured step thus ends
    // with nothing of it in flight (step() returns once the pushes are posted).
    std::size_t next_ps = 0, next_gathered = 0;
    auto sparse_step = [&] {
      ps.sparse_gradient(variable_id{0}, batches[next_ps++ % batches.size()], gradient_rows);
      ps.step();
      ps.pull(variable_id{0}, batches[next_ps % batches.size()]);
    };
    auto gathered_step = [&] {
      gathered.sparse_gradient(variable_id{0}, batches[next_gathered++ % batches.size()], gradient_rows);
      gathered.step();
    };
    auto dense_step = [&] { dense.step(); };

    std::vector<bench::contender> contenders = {
        {"strata sparse PS", sparse_step}, {"sparse all-gather", gathered_step}, {"dense all-reduce", dense_step}};
    bench::interleave(contenders, rounds, steps, [&] { ctx.control().barrier(); });
    const double ps_ms = 1e3 * bench::median(contenders[0].seconds), gathered_ms = 1e3 * bench::median(contenders[1].seconds),
                 dense_ms = 1e3 * bench::median(contenders[2].seconds);
    const plan::link_partners partners = plan::partners_of_rank0(hosts);
    const int link_peer = one_host ? partners.same_host : partners.other_host;
    const double link_bytes_per_s =
        ctx.size() > 1 ? plan::measure_link(ctx, 0, link_peer, 5).bytes_per_s : INFINITY;
    const double row_bytes = static_cast<double>(width * sizeof(float) + sizeof(std::uint32_t));
    const double remote_rows = busiest_link_rows(ctx.control(), remote, one_host, numbered);
    const double ps_bytes = 2.0 * touched * row_bytes, remote_bytes = 2.0 * remote_rows * row_bytes;
    const double wire_ms = 1e3 * ps_bytes / link_bytes_per_s, remote_wire_ms = 1e3 * remote_bytes / link_bytes_per_s;
    if (ctx.rank() == 0) {
      fmt::print("embedding {} x {} fp32 ({:.0f} MiB); {} ranks; {} Zipf({}) ids per rank and step touch {:.0f} rows ({:.2f}%); "
                 "medians of {} rounds of {} steps\n",
                 rows, width, static_cast<double>(rows * width * 4) / (1 << 20), ctx.size(), draws, exponent, touched,
                 100.0 * touched / static_cast<double>(rows), rounds, steps);
      for (const auto& c : contenders) fmt::print("  {:<20} {:9.2f} ms\n", c.name, 1e3 * bench::median(c.seconds));
      fmt::print("point to point {:.2f} GB/s (ranks 0 and {}{}): the PS step's {:.2f} MB need {:.3f} ms on the wire; the "
                 "{:.2f} MB {} {:.3f} ms\n",
                 link_bytes_per_s / 1e9, link_peer, one_host ? ", one host" : ", across hosts", ps_bytes / 1e6, wire_ms,
                 remote_bytes / 1e6,
                 one_host ? "the busiest rank sends to and gets from other ranks' servers"
                          : "the busiest host's link carries each way, pushes then replies",
                 remote_wire_ms);
      fmt::print("summary: ranks={} rows={} width={} touched_fraction={:.4f} sparse_ps_ms={:.2f} sparse_allgather_ms={:.2f} "
                 "dense_allreduce_ms={:.2f} speedup={:.1f} (target >= 20) allgather_speedup={:.1f} ps_wire_ms={:.3f} "
                 "ps_wire_fraction={:.2f} (target >= 0.5) ps_remote_wire_fraction={:.2f}\n",
                 ctx.size(), rows, width, touched / static_cast<double>(rows), ps_ms, gathered_ms, dense_ms, dense_ms / ps_ms,
                 dense_ms / gathered_ms, wire_ms, wire_ms / ps_ms, remote_wire_ms / ps_ms);
    }
    return 0;
  });
}
