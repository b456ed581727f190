#pragma once
// The cost model: the synchronization time of one training step for given strategies of
// given variables, on a cluster, from a calibration. It follows what the executor does:
//
// - all-reduced variables of one strategy are fused into the executor's buckets
//   (sync::plan_buckets, partitioned variables as their parts); the communication thread
//   runs the buckets one after another, each once its variables' gradients are ready, so a
//   bucket whose gradients come early in backward hides behind the rest of backward; a
//   partitioned part that is several blocks of memory costs the calibrated time per block;
// - a bucket of n bytes costs what the calibration measured for its algorithm, carried to
//   the target's p ranks on h hosts by the algorithm's shape (alpha: a message's latency,
//   beta: a byte's time on the slowest link the algorithm crosses):
//     Ring, Native   2(p-1) alpha + 2(p-1)/p n beta
//     Tree           rounds(p) (alpha + n beta), rounds(p) = floor(log2 p) (+2 unless p is 2^k)
//     Hierarchical   2(r-1) alpha + 2(r-1)/r n beta within a host of r ranks,
//                    + 2(h-1) alpha_x + 2(h-1)/h n beta_x across hosts
//   where alpha comes from the fitted line's fixed cost at the calibration's p0 ranks (e.g.
//   for the ring, alpha = fixed / 2(p0-1)) and beta from the measured curve at n bytes (a
//   bucket in cache moves faster than one from memory); Compress<FP16|BF16> halves n on the
//   wire and adds what the casts added where calibrated (the algorithm's FP16 step beyond
//   its uncompressed step of n/2 bytes);
// - parameter-server shards are placed as the executor places them on the target's hosts
//   (sync::ps::server_placement);
//   a step costs the calibration's fixed cost once, and each server, per step, its shards'
//   requests and bytes from every worker, at the per-worker rates of the calibration's
//   one-server measurement (dense: per shard and per byte), slowed by how busy the other
//   servers are (they share the cores with the workers: the calibrated sharing slowdown);
//   the step waits for the busiest server, then for the busiest link between hosts, both
//   ways (push, then reply), which carries the bytes between every server on its host and
//   the other hosts' workers (servers on one host share its link); sparse rows cost per row
//   (sorting, combining) and their bytes along the measured curve;
// - replicated SparseRows tables all-gather every rank's touched rows (per row, and bytes
//   along the curve), and the remote ranks' rows cross the link between hosts;
// - a calibration taken on several hosts measured the servers and the all-gather with
//   ranks on other hosts: its lines hold their bytes' time on the link, which is taken out
//   of them before the target's links are added.
// Parts add: the training thread waits for its synchronizers one after another.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "strata/error.hpp"
#include "strata/plan/calibration.hpp"
#include "strata/strategy/builders.hpp"
#include "strata/strategy/canonical_string.hpp"
#include "strata/sync/bucket_plan.hpp"
#include "strata/sync/partition.hpp"
#include "strata/sync/ps/plan.hpp"

namespace strata::plan {

/// What the cost model knows of a variable.
struct variable_profile {
  std::string name;
  std::vector<std::size_t> shape;
  bool sparse = false;            ///< a SparseRows gradient: rows of a table
  double touched_fraction = 1.0;  ///< sparse: the fraction of rows one rank's step touches
  /// Backward time still to run once this gradient is final: what its all-reduce can hide behind.
  double compute_after_s = 0.0;

  std::size_t elements() const {
    return std::accumulate(shape.begin(), shape.end(), std::size_t{1}, std::multiplies<>());
  }
  std::size_t rows() const { return shape.empty() ? 1 : shape[0]; }
  double bytes() const { return static_cast<double>(elements()) * sizeof(float); }
  /// Rows one rank touches per step (sparse; 0 for a dense gradient), and their bytes (or
  /// the whole gradient's).
  double touched_rows() const { return sparse ? static_cast<double>(rows()) * std::clamp(touched_fraction, 0.0, 1.0) : 0.0; }
  double touched_bytes() const { return sparse ? bytes() * std::clamp(touched_fraction, 0.0, 1.0) : bytes(); }
};

struct cost_options {
  sync::bucket_options buckets;  ///< as the executor will use them
  server_assignment servers = server_assignment::least_loaded;
};

/// Strategy strings as descriptors (strategy_parse_error for a malformed one).
inline std::vector<strategy_descriptor> parse_strategies(std::span<const std::string> strategies) {
  std::vector<strategy_descriptor> out;
  for (const std::string& s : strategies) out.push_back(parse_strategy(s));
  return out;
}

/// What one step's synchronization costs, by part.
struct step_cost {
  double allreduce_s = 0.0;  ///< buckets and replicated sparse rows, after backward ends
  double parameter_server_s = 0.0;
  double total() const { return allreduce_s + parameter_server_s; }
};

class cost_model {
 public:
  /// `across_hosts`, when known, replaces the calibration's cross-host link: to predict a
  /// cluster other than the one calibrated ("what if the hosts had 10 Gbit/s").
  cost_model(calibration c, cluster target, link_class across_hosts = {}, cost_options options = {})
      : c_(std::move(c)), target_(target), options_(options) {
    if (target_.ranks < 1 || target_.ranks_per_host < 1)
      throw usage_error(fmt::format("cost_model: a cluster of {} ranks, {} per host; both must be at least 1",
                                    target_.ranks, target_.ranks_per_host));
    across_ = across_hosts.known() ? across_hosts : c_.across_hosts.known() ? c_.across_hosts : c_.within_host;
  }

  const cluster& target() const { return target_; }
  const calibration& calibrated() const { return c_; }
  const cost_options& options() const { return options_; }

  /// One all-reduce of `bytes` (fp32 gradient bytes) with `algorithm` and `codec`:
  /// Compress<FP16|BF16> moves half the bytes, plus what the casts added where calibrated.
  double allreduce_seconds(collective_kind algorithm, codec_kind codec, double bytes) const {
    if (target_.ranks <= 1) return 0.0;
    if (codec == codec_kind::none) return shaped(algorithm, target_, bytes);
    if (codec != codec_kind::fp16 && codec != codec_kind::bf16)
      throw usage_error("the cost model predicts Compress<FP16> and Compress<BF16>; TopK and PowerSGD change what is "
                        "learned and are not among its candidates");
    const double measured = c_.allreduce(algorithm, true).at(bytes);
    const double casts = std::max(0.0, measured - shaped(algorithm, c_.measured_on, bytes / 2));
    return casts + shaped(algorithm, target_, bytes / 2);
  }

  /// The synchronization of one step with `strategies[i]` for `variables[i]`.
  step_cost predict(std::span<const variable_profile> variables, std::span<const strategy_descriptor> strategies) const {
    if (variables.size() != strategies.size())
      throw usage_error(fmt::format("cost_model::predict: {} variables and {} strategies", variables.size(), strategies.size()));
    step_cost cost;
    cost.allreduce_s = replicated_seconds(variables, strategies);
    cost.parameter_server_s = parameter_server_seconds(variables, strategies);
    return cost;
  }

  step_cost predict(std::span<const variable_profile> variables, std::span<const std::string> strategies) const {
    return predict(variables, parse_strategies(strategies));
  }

 private:
  /// What a byte of an n-byte bucket cost beyond the fixed cost, where it was measured.
  static double per_byte_at(const line& l, double bytes) {
    return bytes > 0 ? std::max(0.0, l.at(bytes) - l.fixed_s) / bytes : l.per_byte_s;
  }

  // One uncompressed all-reduce of `bytes` on the cluster `on`, by the algorithm's shape.
  double shaped(collective_kind algorithm, const cluster& on, double bytes) const {
    const int p = on.ranks, h = on.hosts(), r = on.ranks_on_a_host();
    const line& l = c_.allreduce(algorithm, false);
    switch (algorithm) {
      case collective_kind::ring:
      case collective_kind::native: return ring_shaped(l, p, h > 1, bytes);
      case collective_kind::tree: return tree_shaped(p, h, bytes);
      default: {  // hierarchical
        const double within = r > 1 ? ring_shaped(l, r, false, bytes) : 0.0;
        const double across = h > 1 ? 2.0 * (h - 1) * across_.latency_s + 2.0 * (h - 1) / h * bytes * across_.seconds_per_byte()
                                    : 0.0;
        return within + across;
      }
    }
  }

  // Ring-shaped: 2(p-1) latencies and 2(p-1)/p of the bytes, at the line's rates per link.
  double ring_shaped(const line& l, int p, bool crosses_hosts, double bytes) const {
    const int p0 = c_.measured_on.ranks;
    double alpha = l.fixed_s / (2.0 * (p0 - 1)), beta = per_byte_at(l, bytes) * p0 / (2.0 * (p0 - 1));
    if (crosses_hosts) alpha = std::max(alpha, across_.latency_s), beta = std::max(beta, across_.seconds_per_byte());
    return 2.0 * (p - 1) * alpha + 2.0 * (p - 1) / p * bytes * beta;
  }

  static int tree_rounds(int p) {
    const int doubling = static_cast<int>(std::floor(std::log2(p)));
    return doubling + ((1 << doubling) == p ? 0 : 2);  // ranks past 2^k fold in first and are sent the result last
  }

  double tree_shaped(int p, int h, double bytes) const {
    const int rounds0 = tree_rounds(c_.measured_on.ranks), rounds = tree_rounds(p);
    const double alpha = c_.tree.fixed_s / rounds0, beta = per_byte_at(c_.tree, bytes) / rounds0;
    const int across = h > 1 ? static_cast<int>(std::ceil(std::log2(h))) : 0;  // rounds whose partners are on other hosts
    return (rounds - across) * (alpha + bytes * beta) +
           across * (std::max(alpha, across_.latency_s) + bytes * std::max(beta, across_.seconds_per_byte()));
  }

  // Every all-reduced bucket (each strategy's variables fused as the executor fuses them) on
  // the one communication thread, in the order their gradients are ready; then the
  // replicated sparse rows' all-gathers, which run at step().
  double replicated_seconds(std::span<const variable_profile> variables, std::span<const strategy_descriptor> strategies) const {
    struct job {
      double ready, seconds;  // ready: seconds before backward ends (negative: earlier)
    };
    std::vector<job> jobs;
    std::vector<bool> done(variables.size(), false);
    double allgather = 0.0;
    for (std::size_t i = 0; i < variables.size(); ++i) {
      const strategy_descriptor& s = strategies[i];
      if (done[i] || s.placement != placement_kind::replicate) continue;
      if (s.sparse_rows) {
        allgather += sparse_allgather_seconds(variables[i]);
        done[i] = true;
        continue;
      }
      // The strategy's pieces, in declaration order, and when each is ready.
      std::vector<std::size_t> elements;
      std::vector<double> ready, extra_blocks;
      for (std::size_t k = i; k < variables.size(); ++k) {
        if (!(strategies[k] == s)) continue;
        done[k] = true;
        const variable_profile& v = variables[k];
        const int parts = s.partitioned() ? target_.ranks : 1;
        for (const sync::part_layout& part : sync::partition_layout(v.shape, v.elements(), s.partition_axis, parts)) {
          elements.push_back(part.elements());
          ready.push_back(-v.compute_after_s);
          extra_blocks.push_back(static_cast<double>(part.blocks.size() - 1));
        }
      }
      for (const sync::bucket_layout& b : sync::plan_buckets(elements, sizeof(float), options_.buckets)) {
        double bytes = 0.0, at = -1e300, blocks = 0.0;
        for (std::size_t member : b.members) {
          bytes += static_cast<double>(elements[member]) * sizeof(float);
          at = std::max(at, ready[member]);
          blocks += extra_blocks[member];
        }
        jobs.push_back({at, allreduce_seconds(s.collective, s.codec, bytes) + blocks * c_.per_block_s});
      }
    }
    std::ranges::stable_sort(jobs, {}, &job::ready);
    double finish = -1e300;
    for (const job& j : jobs) finish = std::max(finish, j.ready) + j.seconds;
    return std::max(0.0, finish) + allgather;
  }

  double sparse_allgather_seconds(const variable_profile& v) const {
    const int p = target_.ranks, p0 = c_.measured_on.ranks;
    if (p <= 1) return 0.0;
    const double others = static_cast<double>(p - 1) / (p0 - 1);  // every other rank's rows come in
    const double bytes = v.touched_bytes();
    const double remote = target_.hosts() > 1 ? (p - target_.ranks_on_a_host()) * bytes * across_.seconds_per_byte() : 0.0;
    const line& l = c_.sparse_allgather;
    const double gathered = l.fixed_s + without_calibrated_link(l.at(bytes) - l.fixed_s, bytes, 1.0, p0 - 1);
    return others * (l.per_row_s * v.touched_rows() + gathered) + remote;
  }

  // A calibration taken on several hosts measured the servers and the all-gather with ranks
  // on other hosts than rank 0's, so its lines hold those ranks' bytes on the link, which the
  // model adds for the target's layout itself: `seconds` of a line at `bytes` (one rank's),
  // less the link's time for each remote rank's bytes crossing `crossings` times. What is
  // left is never less than `copies` ranks' bytes moved once within a host: where the link
  // hid the work (it overlapped more than the model's crossings one after another), the
  // work is not free. A calibration on one host is taken as it is.
  double without_calibrated_link(double seconds, double bytes, double crossings, int copies) const {
    const std::vector<int>& layout = c_.ranks_per_host;
    if (layout.size() <= 1) return seconds;
    const int remote = c_.measured_on.ranks - layout.front();  // the ranks off rank 0's host
    const double left = seconds - crossings * remote * bytes * c_.across_hosts.seconds_per_byte();
    return std::max(left, c_.measured_within_host() ? copies * bytes * c_.within_host.seconds_per_byte() : 0.0);
  }

  // Each shard on its server, as the executor places them; per server, every worker's
  // requests and bytes for the shards it hosts (dense bytes at the measured curve's rate for
  // the server's whole load); the busiest server sets the time. Then the links between hosts:
  // every worker pushes to every server and the replies cross back after, so while workers
  // push, a host's link carries in its servers' bytes from the other hosts' workers and out
  // its workers' bytes to the other hosts' servers (replies: the same, reversed). Servers on
  // one host share its link; the busiest direction of any link sets each crossing's time.
  double parameter_server_seconds(std::span<const variable_profile> variables,
                                  std::span<const strategy_descriptor> strategies) const {
    const int p = target_.ranks, p0 = c_.measured_on.ranks;
    const auto servers = static_cast<std::size_t>(p);
    std::vector<double> shards(servers, 0.0), dense_bytes(servers, 0.0), sparse_rows(servers, 0.0),
        sparse_bytes(servers, 0.0);
    double fixed = 0.0;  // once per step: the slowest family's
    const double workers = static_cast<double>(p) / p0;  // the one-server lines hold p0 workers' share
    sync::ps::server_placement placement(p, options_.servers, target_.host_of_each_rank());
    const std::vector<std::size_t>& ranks_on = placement.ranks_on_host();
    std::vector<double> served(ranks_on.size(), 0.0);  // one worker's bytes to each host's servers
    double all_served = 0.0;                            // and to every server
    for (std::size_t i = 0; i < variables.size(); ++i) {
      const strategy_descriptor& s = strategies[i];
      if (s.placement != placement_kind::ps) continue;
      const variable_profile& v = variables[i];
      const int parts = s.partitioned() ? s.ps_shards : 1;
      for (const sync::part_layout& part : sync::partition_layout(v.shape, v.elements(), s.partition_axis, parts)) {
        const std::size_t server = placement.place(part.elements() * sizeof(float));
        const double share = static_cast<double>(part.elements()) / static_cast<double>(std::max<std::size_t>(v.elements(), 1));
        const double bytes = v.touched_bytes() * share;  // one worker's, each way
        if (v.sparse) {
          fixed = std::max(fixed, c_.sparse_parameter_server.fixed_s);
          sparse_rows[server] += v.touched_rows() * share;
          sparse_bytes[server] += bytes;
        } else {
          fixed = std::max(fixed, c_.parameter_server.fixed_s);
          shards[server] += 1.0;
          dense_bytes[server] += bytes;
        }
        served[placement.host_of(server)] += bytes;
        all_served += bytes;
      }
    }
    // Each server's work as if it were the only one busy, then slowed by how busy the others are;
    // without the link time a calibration across hosts holds (the bytes go in and come back).
    const auto work = [&](const line& l, double bytes) {
      return without_calibrated_link(per_byte_at(l, bytes) * bytes, bytes, 2.0, p0);
    };
    std::vector<double> dense(servers), sparse(servers), load(servers);
    for (std::size_t r = 0; r < servers; ++r) {
      const line &d = c_.parameter_server, &s = c_.sparse_parameter_server;
      dense[r] = workers * (d.per_row_s * shards[r] + work(d, dense_bytes[r]));
      sparse[r] = workers * (s.per_row_s * sparse_rows[r] + work(s, sparse_bytes[r]));
      load[r] = dense[r] + sparse[r];
    }
    const double others = other_servers_busy(load);
    double busiest = 0.0;
    for (std::size_t r = 0; r < servers; ++r)
      busiest = std::max(busiest, dense[r] * (1 + c_.parameter_server_sharing * others) +
                                      sparse[r] * (1 + c_.sparse_parameter_server_sharing * others));
    // While workers push, a host's link carries in the other hosts' workers' bytes to its
    // servers and out its workers' bytes to the other hosts' servers.
    double busiest_link = 0.0;
    for (std::size_t h = 0; h < ranks_on.size(); ++h) {
      const auto here = static_cast<double>(ranks_on[h]);
      busiest_link = std::max({busiest_link, (p - here) * served[h], here * (all_served - served[h])});
    }
    return fixed + busiest + 2.0 * busiest_link * across_.seconds_per_byte();
  }

  calibration c_;
  cluster target_;
  link_class across_;
  cost_options options_;
};

}  // namespace strata::plan
