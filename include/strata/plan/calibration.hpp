#pragma once
// What the cost model knows of a machine: a calibration, measured by plan::calibrate (or the
// strata-calibrate program) over the real backend and kept as a small JSON file that later
// runs load. A calibration holds fitted lines (seconds = fixed + per_byte * bytes) of what each
// synchronization family cost on the world it was measured on, and the link classes
// (within a host, across hosts) that carry those costs to other worlds. It is refused where
// it does not describe the run: another world size, another host layout, another backend.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "strata/error.hpp"

namespace strata::plan {

/// The machines a run uses: ranks, and how many share a host (the last host may hold fewer).
struct cluster {
  int ranks = 1;
  int ranks_per_host = 1;
  int hosts() const { return (ranks + ranks_per_host - 1) / ranks_per_host; }
  /// Ranks on the busiest host: the ranks that share one host's link.
  int ranks_on_a_host() const { return std::min(ranks, ranks_per_host); }
  friend bool operator==(const cluster&, const cluster&) = default;
};

/// A link class: a message of n bytes takes latency_s + n / bytes_per_s.
struct link_class {
  double latency_s = 0.0;
  double bytes_per_s = 0.0;  ///< 0: not known
  bool known() const { return bytes_per_s > 0.0; }
  double seconds_per_byte() const { return known() ? 1.0 / bytes_per_s : 0.0; }
};

/// seconds = fixed_s + per_byte_s * bytes: a cost fitted to measurements.
struct line {
  double fixed_s = 0.0;
  double per_byte_s = 0.0;
  double operator()(double bytes) const { return fixed_s + per_byte_s * bytes; }

  /// The line through (bytes, seconds) with the least relative error (least squares
  /// weighted by 1/seconds^2: a 16 KiB point counts as much as a 16 MiB one, so the fixed
  /// cost is not lost under the large sizes' bytes), neither coefficient below zero.
  static line fit(std::span<const double> bytes, std::span<const double> seconds) {
    double s = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      const double w = seconds[i] > 0 ? 1.0 / (seconds[i] * seconds[i]) : 0.0;
      s += w;
      sx += w * bytes[i];
      sy += w * seconds[i];
      sxx += w * bytes[i] * bytes[i];
      sxy += w * bytes[i] * seconds[i];
    }
    line l;
    if (s == 0) return l;
    const double spread = s * sxx - sx * sx;
    l.per_byte_s = spread > 0 ? (s * sxy - sx * sy) / spread : 0.0;
    l.fixed_s = (sy - l.per_byte_s * sx) / s;
    if (l.per_byte_s < 0) l = {sy / s, 0.0};                        // flat: the mean
    else if (l.fixed_s < 0) l = {0.0, sxx > 0 ? sxy / sxx : 0.0};  // through the origin
    return l;
  }
};

/// A machine's costs, as measured on `measured_on`.
struct calibration {
  static constexpr int format_version = 1;
  std::string backend = "mpi";
  cluster measured_on;
  std::vector<int> ranks_per_host;  ///< the layout measured: ranks on each host, in host order
  link_class within_host;                 ///< point to point between two ranks of a host
  link_class across_hosts;                ///< between hosts; unknown when measured on one host
  // One synchronization of a variable (or fusion bucket) of n fp32 gradient bytes, on
  // measured_on.ranks ranks, through the executor:
  line ring, tree, hierarchical, native;  ///< Replicate, AllReduce<...>
  line parameter_server;                  ///< PS<1> BSP, dense: push, apply, pull, every worker on one server
  line sparse_parameter_server;           ///< PS<1> BSP, SparseRows: n = bytes of the rows each worker touches
  line sparse_allgather;                  ///< Replicate, AllReduce, SparseRows: n = bytes of each rank's rows
  double cast_bytes_per_s = 0.0;          ///< fp32 bytes encoded to 16 bits and decoded back, per second
  std::string created;                    ///< when and where, for people

  /// Refuses (usage_error, saying what differs) a calibration that does not describe a run
  /// on `run` with `layout` (ranks on each host) over `backend`.
  void check_matches(const cluster& run, std::span<const int> layout, const std::string& run_backend = "mpi") const {
    auto refuse = [&](const std::string& what) {
      throw usage_error(fmt::format("this calibration ({}) was measured {}; recalibrate on this job (strata-calibrate "
                                    "--output FILE under the same mpirun) or pass a calibration of this layout",
                                    created, what));
    };
    if (backend != run_backend) refuse(fmt::format("on the {} backend, and this run uses {}", backend, run_backend));
    if (measured_on.ranks != run.ranks) refuse(fmt::format("on {} ranks, and this job has {}", measured_on.ranks, run.ranks));
    if (!std::ranges::equal(ranks_per_host, layout))
      refuse(fmt::format("with ranks per host [{}], and this job has [{}]", fmt::join(ranks_per_host, ", "),
                         fmt::join(layout, ", ")));
  }
};

inline void to_json(nlohmann::json& j, const link_class& l) { j = {{"latency_s", l.latency_s}, {"bytes_per_s", l.bytes_per_s}}; }
inline void from_json(const nlohmann::json& j, link_class& l) {
  j.at("latency_s").get_to(l.latency_s);
  j.at("bytes_per_s").get_to(l.bytes_per_s);
}
inline void to_json(nlohmann::json& j, const line& l) { j = {{"fixed_s", l.fixed_s}, {"per_byte_s", l.per_byte_s}}; }
inline void from_json(const nlohmann::json& j, line& l) {
  j.at("fixed_s").get_to(l.fixed_s);
  j.at("per_byte_s").get_to(l.per_byte_s);
}

inline void to_json(nlohmann::json& j, const calibration& c) {
  j = {{"format", calibration::format_version},
       {"backend", c.backend},
       {"ranks", c.measured_on.ranks},
       {"ranks_per_host", c.ranks_per_host},
       {"within_host", c.within_host},
       {"across_hosts", c.across_hosts},
       {"allreduce", {{"ring", c.ring}, {"tree", c.tree}, {"hierarchical", c.hierarchical}, {"native", c.native}}},
       {"parameter_server", c.parameter_server},
       {"sparse_parameter_server", c.sparse_parameter_server},
       {"sparse_allgather", c.sparse_allgather},
       {"cast_bytes_per_s", c.cast_bytes_per_s},
       {"created", c.created}};
}

inline void from_json(const nlohmann::json& j, calibration& c) {
  if (const int format = j.at("format").get<int>(); format != calibration::format_version)
    throw usage_error(fmt::format("a calibration file of format {}; this strata reads format {}: recalibrate", format,
                                  calibration::format_version));
  j.at("backend").get_to(c.backend);
  j.at("ranks").get_to(c.measured_on.ranks);
  j.at("ranks_per_host").get_to(c.ranks_per_host);
  if (c.ranks_per_host.empty() || c.measured_on.ranks < 2)
    throw usage_error("a calibration needs at least 2 ranks on at least one host");
  c.measured_on.ranks_per_host = *std::ranges::max_element(c.ranks_per_host);
  j.at("within_host").get_to(c.within_host);
  j.at("across_hosts").get_to(c.across_hosts);
  const nlohmann::json& allreduce = j.at("allreduce");
  allreduce.at("ring").get_to(c.ring);
  allreduce.at("tree").get_to(c.tree);
  allreduce.at("hierarchical").get_to(c.hierarchical);
  allreduce.at("native").get_to(c.native);
  j.at("parameter_server").get_to(c.parameter_server);
  j.at("sparse_parameter_server").get_to(c.sparse_parameter_server);
  j.at("sparse_allgather").get_to(c.sparse_allgather);
  j.at("cast_bytes_per_s").get_to(c.cast_bytes_per_s);
  j.at("created").get_to(c.created);
}

/// Writes `c` to `file` as JSON.
inline void save(const calibration& c, const std::filesystem::path& file) {
  std::ofstream out(file);
  out << nlohmann::json(c).dump(2) << '\n';
  if (!out.flush()) throw usage_error(fmt::format("cannot write the calibration to \"{}\"", file.string()));
}

/// Reads a calibration from `file`; usage_error naming the file when it is missing, not
/// JSON, or not a calibration.
inline calibration load(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw usage_error(fmt::format("cannot read the calibration \"{}\"; make one with strata-calibrate", file.string()));
  try {
    return nlohmann::json::parse(in).get<calibration>();
  } catch (const nlohmann::json::exception& e) {
    throw usage_error(fmt::format("\"{}\" is not a strata calibration: {}", file.string(), e.what()));
  }
}

}  // namespace strata::plan
