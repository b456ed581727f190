#pragma once
// Calibration: measures, over the real backend and through the executor itself, what the
// cost model needs (plan/calibration.hpp): the point-to-point latency and bandwidth within
// a host and, on several hosts, across them; one variable's synchronization under each
// all-reduce algorithm, under the parameter server (dense, and sparse rows) and under the
// replicated sparse rows' all-gather, at several sizes, each fitted to a line (and a curve);
// each all-reduce algorithm again with 16-bit casts; and what a partitioned part's blocks of
// memory add. Collective: every rank of the job calls it; a few seconds.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <functional>
#include <iterator>
#include <numeric>
#include <span>
#include <utility>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "strata/exec/bounded_collective.hpp"
#include "strata/exec/executor.hpp"
#include "strata/model/model.hpp"
#include "strata/optim/sgd.hpp"
#include "strata/plan/calibration.hpp"
#include "strata/sync/partition.hpp"

namespace strata::plan {

struct calibrate_options {
  int repeats = 9;  ///< timed steps per size (the median counts), after 2 untimed ones
  std::vector<double> allreduce_bytes = {64 << 10, 1 << 20, 16 << 20, 64 << 20};
  std::vector<double> parameter_server_bytes = {64 << 10, 1 << 20, 16 << 20, 64 << 20};
  std::vector<std::size_t> sparse_rows_touched = {256, 2048, 8192};  ///< per rank, of tables of at most 2^18 rows
  /// Called with what is being measured (progress on long runs); may be empty.
  std::function<void(const std::string&)> progress;
};

namespace detail {
/// A context whose collectives are its control channel: the planner's barriers and gathers
/// stay off the channel its executors' collectives use.
template <CommContext Context>
struct on_control {
  Context& context;
  auto& collectives() { return context.control(); }
  auto& control() { return context.control(); }
  auto& parameter_server() { return context.parameter_server(); }
  void abort() { context.abort(); }
  auto& job_control() { return strata::job_control(context); }
  int job_rank(int rank) const { return strata::job_rank(context, rank); }
  std::string describe_job_rank(int rank) const { return strata::describe_job_rank(context, rank); }
};
}  // namespace detail

/// Median seconds of `repeats` calls of `f` (after two untimed ones), each between barriers
/// of the job, as the slowest rank saw it: a step ends when its last rank is done.
/// Collective; a rank that does not come within STRATA_TIMEOUT_SECONDS is named. What
/// calibration and trial runs time steps with.
template <CommContext Context, class F>
double slowest_rank_median(Context& context, int repeats, F&& f) {
  detail::on_control<Context> job{context};
  auto gather = [&](double mine, std::string_view what) {
    std::vector<double> all(static_cast<std::size_t>(job.control().size()));
    collective_within_deadline(job, what, [&](auto& comm) {
      return comm.iallgather(std::span<const double>(&mine, 1), std::span<double>(all));
    });
    return all;
  };
  f();
  f();
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) {
    gather(0.0, "the barrier before a timed step");
    const auto start = std::chrono::steady_clock::now();
    f();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  const double mine = seconds.empty() ? 0.0 : (std::ranges::sort(seconds), seconds[seconds.size() / 2]);
  return std::ranges::max(gather(mine, "the all-gather of the timed steps' medians"));
}

namespace detail {

/// The line through steps under strategy S of one bucket of `sizes` bytes, made of 8
/// variables as a model's buckets are (a bucket of several buffers is what the algorithms
/// see: MPI's copies it into one, the ring reads it in place).
template <class S, CommContext Context>
line fit_dense(Context& ctx, const std::vector<double>& sizes, int repeats) {
  constexpr std::size_t variables = 8, cols = 256;
  std::vector<double> bytes, seconds;
  for (const double size : sizes) {
    const std::size_t rows = std::max<std::size_t>(1, static_cast<std::size_t>(size) / sizeof(float) / cols / variables);
    std::vector<std::vector<float>> params(variables, std::vector<float>(rows * cols, 0.5f));
    std::vector<std::vector<float>> grads(variables, std::vector<float>(rows * cols, 1e-3f));
    model<S> m;
    for (std::size_t v = 0; v < variables; ++v)
      m.add(variable<S>(fmt::format("calibration.{}", v), params[v], grads[v], {rows, cols}));
    executor_options options;
    const std::size_t total = variables * rows * cols * sizeof(float);
    options.buckets = {.first_bucket_bytes = total, .bucket_bytes = total};  // one bucket
    auto exec = make_executor(ctx, m, optim::sgd{.lr = 1e-6f}, options);
    bytes.push_back(static_cast<double>(total));
    seconds.push_back(slowest_rank_median(ctx, repeats, [&] { exec.step(); }));
  }
  line l = line::fit(bytes, seconds);
  l.curve = line::monotone_curve(bytes, seconds);
  return l;
}

/// One parameter-server measurement: the load of the busiest server (shards or rows, and
/// bytes, per worker), how busy the other servers were beside it (other_servers_busy), and
/// the step's seconds.
struct server_point {
  double requests = 0.0, bytes = 0.0, others_busy = 0.0, seconds = 0.0;
};

/// The busiest server's share of what `placed` holds, and how busy the others are.
inline std::pair<double, double> busiest_share(const sync::ps::plan* placed) {
  if (placed == nullptr) return {1.0, 0.0};  // replicated: no servers
  std::vector<double> load(placed->bytes_per_rank.begin(), placed->bytes_per_rank.end());
  const double all = std::accumulate(load.begin(), load.end(), 0.0);
  return {all > 0 ? *std::ranges::max_element(load) / all : 1.0, other_servers_busy(load)};
}

/// A step of m dense PS<1> variables of `size` bytes in all, their servers chosen by `servers`.
template <CommContext Context>
server_point dense_server_step(Context& ctx, std::size_t m, double size, server_assignment servers, int repeats) {
  const std::size_t cols = 256, rows = std::max<std::size_t>(1, static_cast<std::size_t>(size) / sizeof(float) / cols / m);
  std::vector<std::vector<float>> params(m, std::vector<float>(rows * cols, 0.5f)), grads(m, std::vector<float>(rows * cols, 1e-3f));
  model<Strategy<PS<1>>> mdl;
  for (std::size_t v = 0; v < m; ++v)
    mdl.add(variable<Strategy<PS<1>>>(fmt::format("calibration.{}", v), params[v], grads[v], {rows, cols}));
  executor_options options;
  options.ps_servers = servers;
  auto exec = make_executor(ctx, mdl, optim::sgd{.lr = 1e-6f}, options);
  const sync::ps::plan& placed = *exec.parameter_server_plan();
  std::vector<double> hosted(static_cast<std::size_t>(ctx.control().size()), 0.0);
  for (const sync::ps::variable_plan& v : placed.variables)
    for (const sync::ps::shard_plan& shard : v.shards) hosted[static_cast<std::size_t>(shard.host)] += 1.0;
  const auto [share, others] = busiest_share(&placed);
  return {*std::ranges::max_element(hosted), share * static_cast<double>(m * rows * cols * sizeof(float)), others,
          slowest_rank_median(ctx, repeats, [&] { exec.step(); })};
}

/// The dense parameter server's line, from steps of m variables of n bytes in all on one
/// server (every shard on rank 0): against its shards (the line's per-row term: every
/// worker's push and pull of each) and bytes, with the curve of the 8-variable steps.
template <CommContext Context>
line fit_parameter_server(Context& ctx, const std::vector<double>& sizes, int repeats) {
  std::vector<std::pair<std::size_t, double>> shapes;  // (variables, bytes in all)
  for (const double size : sizes) shapes.emplace_back(8, size);
  for (const std::size_t m : {32, 128}) shapes.emplace_back(m, sizes.front() * static_cast<double>(m) / 8);
  std::vector<double> shards, bytes, seconds;
  for (const auto& [m, size] : shapes) {
    const server_point p = dense_server_step(ctx, m, size, server_assignment::first_server, repeats);
    shards.push_back(p.requests);
    bytes.push_back(p.bytes);
    seconds.push_back(p.seconds);
  }
  line l = line::fit(shards, bytes, seconds);
  l.curve = line::monotone_curve(std::span<const double>(bytes).first(sizes.size()),
                                 std::span<const double>(seconds).first(sizes.size()));
  return l;
}

/// Sparse steps under S (push the rows' gradient, step, pull the rows) of a table of rows of
/// `width` floats (at most 2^18 rows and 64 MiB), at each count of rows touched per rank,
/// spread over the table and different on each rank, as a batch's embedding lookups are.
template <class S, CommContext Context>
std::vector<server_point> sparse_steps(Context& ctx, std::size_t width, const std::vector<std::size_t>& touched, int repeats) {
  const std::size_t rows = std::min(std::size_t{1} << 18, (std::size_t{1} << 24) / width);
  std::vector<float> table(rows * width, 0.5f);
  auto m = make_model(variable<S>("calibration", table, {}, {rows, width}));
  auto exec = make_executor(ctx, m, optim::sgd{.lr = 1e-6f});
  const auto [share, others] = busiest_share(exec.parameter_server_plan());
  std::vector<server_point> points;
  for (const std::size_t n : touched) {
    std::vector<std::uint32_t> picked(std::min(n, rows));
    for (std::size_t i = 0; i < picked.size(); ++i)
      picked[i] = static_cast<std::uint32_t>((i * 7919 + static_cast<std::size_t>(ctx.control().rank()) * 104729) % rows);
    std::ranges::sort(picked);
    picked.erase(std::ranges::unique(picked).begin(), picked.end());
    std::vector<float> values(picked.size() * width, 1e-3f);
    // Push, then pull the rows for the next step: step() only posts the pushes, and the pull
    // is answered once they are applied, so a timed step includes them.
    const double seconds = slowest_rank_median(ctx, repeats, [&] {
      exec.sparse_gradient(variable_id{0}, picked, values);
      exec.step();
      exec.pull(variable_id{0}, picked);
    });
    points.push_back({share * static_cast<double>(picked.size()), share * static_cast<double>(values.size() * sizeof(float)),
                      others, seconds});
  }
  return points;
}

/// Sparse steps under S of tables with rows of 512, 64 and 1 floats, fitted as a row term
/// and a byte curve: the one-float rows' steps give the per-row cost (sorting, combining:
/// their bytes are negligible), and what is left of every step beyond its rows is the curve
/// of its bytes (wide rows of a large table stream from memory at a rate one line cannot
/// share with small ones: the 16 MB steps cost half again what a line through the others says).
template <class S, CommContext Context>
line fit_sparse(Context& ctx, const std::vector<std::size_t>& touched, int repeats) {
  std::vector<server_point> points;
  for (const std::size_t width : {std::size_t{512}, std::size_t{64}})
    std::ranges::copy(sparse_steps<S>(ctx, width, touched, repeats), std::back_inserter(points));
  const std::vector<server_point> narrow = sparse_steps<S>(ctx, 1, touched, repeats);
  std::vector<double> narrow_rows, narrow_seconds;
  for (const server_point& p : narrow) narrow_rows.push_back(p.requests), narrow_seconds.push_back(p.seconds);
  const line per_row = line::fit(narrow_rows, std::vector<double>(narrow.size(), 0.0), narrow_seconds);
  std::ranges::copy(narrow, std::back_inserter(points));
  std::vector<double> bytes, beyond_rows;
  for (const server_point& p : points) {
    bytes.push_back(p.bytes);
    beyond_rows.push_back(std::max(0.0, p.seconds - per_row.per_row_s * p.requests));
  }
  line l = line::fit(bytes, beyond_rows);
  l.per_row_s = per_row.per_row_s;
  l.curve = line::monotone_curve(bytes, beyond_rows);
  return l;
}

/// Sparse steps of 64-float rows with the table's shards on as many servers as the job has
/// ranks (up to 8; a shard count is a type): every server busy, or as many as that.
template <CommContext Context>
std::vector<server_point> spread_sparse_steps(Context& ctx, const std::vector<std::size_t>& touched, int repeats) {
  const int p = ctx.control().size();
  if (p >= 8) return sparse_steps<Strategy<PS<8>, Partition<0>, SparseRows>>(ctx, 64, touched, repeats);
  if (p >= 4) return sparse_steps<Strategy<PS<4>, Partition<0>, SparseRows>>(ctx, 64, touched, repeats);
  if (p >= 3) return sparse_steps<Strategy<PS<3>, Partition<0>, SparseRows>>(ctx, 64, touched, repeats);
  return sparse_steps<Strategy<PS<2>, Partition<0>, SparseRows>>(ctx, 64, touched, repeats);
}

/// How much a server's work slows per unit of the other servers' busy-ness, where servers
/// share the cores with the workers: steps with the load spread over several servers
/// against what the one-server `predict` gives for their busiest server's load; the median
/// over the points, never below zero.
template <class Predict>
double sharing_slowdown(const std::vector<server_point>& spread, Predict&& predict) {
  std::vector<double> slowdown;
  for (const server_point& p : spread)
    if (p.others_busy > 0 && predict(p) > 0) slowdown.push_back((p.seconds / predict(p) - 1) / p.others_busy);
  if (slowdown.empty()) return 0.0;
  std::ranges::sort(slowdown);
  return std::max(0.0, slowdown[slowdown.size() / 2]);
}

/// What a partitioned part costs per block of memory beyond its first: steps of a [rows, 8]
/// variable under AllReduce<Ring>, Partition<1> (each part a column range: one block per
/// row) against the contiguous ring's curve at the same bytes.
template <CommContext Context>
double fit_per_block(Context& ctx, const line& ring, int repeats) {
  using S = Strategy<AllReduce<Ring>, Partition<1>>;
  constexpr std::size_t cols = 8;
  std::vector<double> per_block;
  for (const std::size_t bytes : {std::size_t{1} << 20, std::size_t{8} << 20}) {
    const std::size_t rows = bytes / sizeof(float) / cols;
    std::vector<float> param(rows * cols, 0.5f), grad(rows * cols, 1e-3f);
    auto m = make_model(variable<S>("calibration", param, grad, {rows, cols}));
    auto exec = make_executor(ctx, m, optim::sgd{.lr = 1e-6f});
    double extra_blocks = 0.0;
    for (const sync::part_layout& part : sync::partition_layout({rows, cols}, rows * cols, 1, ctx.control().size()))
      extra_blocks += static_cast<double>(part.blocks.size() - 1);
    const double seconds = slowest_rank_median(ctx, repeats, [&] { exec.step(); });
    per_block.push_back(std::max(0.0, seconds - ring.at(static_cast<double>(bytes))) / extra_blocks);
  }
  return std::accumulate(per_block.begin(), per_block.end(), 0.0) / static_cast<double>(per_block.size());
}

}  // namespace detail

/// Half a round trip of `bytes` between ranks `a` and `b` (the others wait), median; a
/// partner that does not answer within STRATA_TIMEOUT_SECONDS is named.
template <CommContext Context>
double one_way_seconds(Context& context, int a, int b, std::size_t bytes, int repeats) {
  auto& comm = context.control();
  std::vector<std::byte> buffer(std::max<std::size_t>(bytes, 1));
  constexpr int tag = 0x5ca1;
  const int me = comm.rank(), other = me == a ? b : a;
  auto finish = [&](auto request, std::string_view verb) {
    if constexpr (Testable<std::remove_reference_t<decltype(comm)>>) {
      const auto timeout = default_timeout();
      wait_within_deadline(context, job_rank(context, other), timeout, [&] { return comm.test(request); }, [&] {
        abort_after_deadline(context, fmt::format("strata ({}): no progress for {:.1f} s: measuring the link to {} with "
                                                  "{} bytes (calibration); {}. Raise STRATA_TIMEOUT_SECONDS if the "
                                                  "ranks are only slow",
                                                  describe_job_rank(context, job_rank(context, me)), timeout.count(),
                                                  describe_job_rank(context, job_rank(context, other)), bytes,
                                                  blamed_ranks(context, std::vector<int>{other}, verb)));
      });
    } else {
      comm.wait(request);
    }
  };
  auto exchange = [&] {
    if (me != a && me != b) return;
    const std::span<std::byte> data(buffer);
    if (me == a) {
      finish(comm.isend(std::span<const std::byte>(data), other, tag), "take the message");
      finish(comm.irecv(data, other, tag), "send the reply");
    } else {
      finish(comm.irecv(data, other, tag), "send the message");
      finish(comm.isend(std::span<const std::byte>(data), other, tag), "take the reply");
    }
  };
  return slowest_rank_median(context, repeats, exchange) / 2;
}

/// The link between ranks `a` and `b`: its latency (half a round trip of 8 bytes) and its
/// bandwidth (8 MiB, beyond the latency). Collective: the other ranks wait.
template <CommContext Context>
link_class measure_link(Context& context, int a, int b, int repeats) {
  const double small = one_way_seconds(context, a, b, 8, repeats * 3);
  constexpr std::size_t large = std::size_t{8} << 20;
  const double big = one_way_seconds(context, a, b, large, repeats);
  return {small, static_cast<double>(large) / std::max(big - small, 1e-9)};
}

/// Rank 0's partners for measuring links: the first other rank on its host and the first rank
/// on another host (-1 where there is none), by each rank's host (host_of_each_rank).
struct link_partners {
  int same_host = -1, other_host = -1;
};
inline link_partners partners_of_rank0(std::span<const int> hosts) {
  link_partners found;
  for (std::size_t r = 1; r < hosts.size(); ++r) {
    int& partner = hosts[r] == hosts[0] ? found.same_host : found.other_host;
    if (partner < 0) partner = static_cast<int>(r);
  }
  return found;
}

/// Each rank's host (host_of_each_rank), gathered within the deadline. Collective.
template <CommContext Context>
std::vector<int> hosts_of_ranks(Context& ctx) {
  detail::on_control<Context> job{ctx};
  const int mine = ctx.control().node_color();
  std::vector<int> hosts(static_cast<std::size_t>(ctx.control().size()));
  collective_within_deadline(job, "the all-gather of each rank's host", [&](auto& comm) {
    return comm.iallgather(std::span<const int>(&mine, 1), std::span<int>(hosts));
  });
  return hosts;
}

/// Ranks on each host, in host order (hosts ordered by their first rank): the layout a
/// calibration is bound to.
inline std::vector<int> host_layout(std::span<const int> hosts) {
  const std::vector<std::size_t> ranks = number_hosts(hosts).ranks_on_host;
  return {ranks.begin(), ranks.end()};
}

/// The job of `layout` (ranks on each host) as the cost model sees it: its ranks and the
/// most on one host.
inline cluster cluster_of(std::span<const int> layout) {
  return {std::accumulate(layout.begin(), layout.end(), 0), *std::ranges::max_element(layout)};
}

/// Measures this job's calibration (collective; every rank returns the same).
template <CommContext Context>
calibration calibrate(Context& ctx, const calibrate_options& o = {}) {
  auto& control = ctx.control();
  if (control.size() < 2)
    throw usage_error("calibrate: a calibration measures communication and needs at least 2 ranks (mpirun -np 2 or more)");
  auto say = [&](const std::string& what) {
    if (o.progress) o.progress(what);
  };
  calibration c;
  const std::vector<int> hosts = hosts_of_ranks(ctx);
  c.measured_on.ranks = control.size();
  c.ranks_per_host = host_layout(hosts);
  c.measured_on.ranks_per_host = *std::ranges::max_element(c.ranks_per_host);

  say("point to point");
  const link_partners partners = partners_of_rank0(hosts);
  if (partners.same_host >= 0) c.within_host = measure_link(ctx, 0, partners.same_host, o.repeats);
  if (partners.other_host >= 0) c.across_hosts = measure_link(ctx, 0, partners.other_host, o.repeats);
  if (!c.within_host.known()) c.within_host = c.across_hosts;  // one rank per host

  say("all-reduce: Ring");
  c.ring = detail::fit_dense<Strategy<AllReduce<Ring>>>(ctx, o.allreduce_bytes, o.repeats);
  c.ring_fp16 = detail::fit_dense<Strategy<AllReduce<Ring>, Compress<FP16>>>(ctx, o.allreduce_bytes, o.repeats);
  say("all-reduce: Tree");
  c.tree = detail::fit_dense<Strategy<AllReduce<Tree>>>(ctx, o.allreduce_bytes, o.repeats);
  c.tree_fp16 = detail::fit_dense<Strategy<AllReduce<Tree>, Compress<FP16>>>(ctx, o.allreduce_bytes, o.repeats);
  say("all-reduce: Hierarchical");
  c.hierarchical = detail::fit_dense<Strategy<AllReduce<Hierarchical>>>(ctx, o.allreduce_bytes, o.repeats);
  c.hierarchical_fp16 =
      detail::fit_dense<Strategy<AllReduce<Hierarchical>, Compress<FP16>>>(ctx, o.allreduce_bytes, o.repeats);
  say("all-reduce: Native");
  c.native = detail::fit_dense<Strategy<AllReduce<Native>>>(ctx, o.allreduce_bytes, o.repeats);
  c.native_fp16 = detail::fit_dense<Strategy<AllReduce<Native>, Compress<FP16>>>(ctx, o.allreduce_bytes, o.repeats);
  say("all-reduce: partitioned parts");
  c.per_block_s = detail::fit_per_block(ctx, c.ring, o.repeats);
  say("parameter server: dense");
  c.parameter_server = detail::fit_parameter_server(ctx, o.parameter_server_bytes, o.repeats);
  std::vector<detail::server_point> spread;
  for (const double size : o.parameter_server_bytes)
    spread.push_back(detail::dense_server_step(ctx, 8, size, server_assignment::least_loaded, o.repeats));
  c.parameter_server_sharing = detail::sharing_slowdown(spread, [&](const detail::server_point& p) {
    return c.parameter_server.per_row_s * p.requests + c.parameter_server.at(p.bytes);
  });
  say("parameter server: sparse rows");
  c.sparse_parameter_server = detail::fit_sparse<Strategy<PS<1>, SparseRows>>(ctx, o.sparse_rows_touched, o.repeats);
  c.sparse_parameter_server_sharing = detail::sharing_slowdown(
      detail::spread_sparse_steps(ctx, o.sparse_rows_touched, o.repeats),
      [&](const detail::server_point& p) { return c.sparse_parameter_server.sparse_at(p.bytes, p.requests); });
  say("replicated sparse rows: all-gather");
  c.sparse_allgather = detail::fit_sparse<Strategy<AllReduce<Ring>, SparseRows>>(ctx, o.sparse_rows_touched, o.repeats);
  const std::time_t now = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  c.created = fmt::format("{}, {} ranks on {} host{}", when, c.measured_on.ranks, c.ranks_per_host.size(),
                          c.ranks_per_host.size() > 1 ? "s" : "");
  return c;
}

/// This job as the cost model sees it: its ranks and the most on one host (collective).
template <CommContext Context>
cluster this_job(Context& ctx) {
  return cluster_of(host_layout(hosts_of_ranks(ctx)));
}

/// The calibration a job plans with: `file` (strata-calibrate --output) when one is given,
/// refused when it describes another job; else measured now (collective, tens of seconds).
template <CommContext Context>
calibration load_or_calibrate(Context& ctx, const std::string& file, const calibrate_options& o = {}) {
  if (file.empty()) return calibrate(ctx, o);
  calibration c = load(file);
  const std::vector<int> layout = host_layout(hosts_of_ranks(ctx));
  c.check_matches(cluster_of(layout), layout);
  return c;
}

}  // namespace strata::plan
