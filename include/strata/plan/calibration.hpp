#pragma once
// What the cost model knows of a machine: a calibration, measured by plan::calibrate (or the
// strata-calibrate program) over the real backend and kept as a small JSON file that later
// runs load. A calibration holds fitted lines (seconds = fixed + per_byte * bytes) of what each
// synchronization family cost on the world it was measured on, and the link classes
// (within a host, across hosts) that carry those costs to other worlds. It is refused where
// it does not describe the run: another world size, another host layout, another backend.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ios>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "strata/detail/text.hpp"
#include "strata/error.hpp"
#include "strata/strategy/descriptor.hpp"

namespace strata::plan {

/// The machines a run uses: ranks, and how many share a host (the last host may hold fewer).
struct cluster {
  int ranks = 1;
  int ranks_per_host = 1;
  int hosts() const { return (ranks + ranks_per_host - 1) / ranks_per_host; }
  /// Ranks on the busiest host: the ranks that share one host's link.
  int ranks_on_a_host() const { return std::min(ranks, ranks_per_host); }
  /// Each rank's host: consecutive ranks share one, as mpirun fills a host's slots first.
  std::vector<int> host_of_each_rank() const {
    std::vector<int> hosts(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) hosts[static_cast<std::size_t>(r)] = r / std::max(ranks_per_host, 1);
    return hosts;
  }
  friend bool operator==(const cluster&, const cluster&) = default;
};

/// A link class: a message of n bytes takes latency_s + n / bytes_per_s.
struct link_class {
  double latency_s = 0.0;
  double bytes_per_s = 0.0;  ///< 0: not known
  bool known() const { return bytes_per_s > 0.0; }
  double seconds_per_byte() const { return known() ? 1.0 / bytes_per_s : 0.0; }
};

/// seconds = fixed_s + per_row_s * rows + per_byte_s * bytes: a cost fitted to measurements
/// (rows: the rows of a sparse table moved; 0 for dense variables).
struct line {
  double fixed_s = 0.0;
  double per_byte_s = 0.0;
  double per_row_s = 0.0;
  /// The measured seconds by bytes (a sparse family's beyond its per-row cost): see at().
  std::vector<std::pair<double, double>> curve = {};
  double operator()(double bytes, double rows = 0.0) const { return fixed_s + per_byte_s * bytes + per_row_s * rows; }

  /// Seconds of a sparse family's step: its rows at the per-row rate, its bytes along the curve.
  double sparse_at(double bytes, double rows) const { return per_row_s * rows + at(bytes); }

  /// The curve through measurements (bytes, seconds): by bytes, equal sizes averaged, and
  /// never falling (more bytes never cost less; a dip is the machine's noise).
  static std::vector<std::pair<double, double>> monotone_curve(std::span<const double> bytes,
                                                               std::span<const double> seconds) {
    std::vector<std::pair<double, double>> points;
    for (std::size_t i = 0; i < bytes.size(); ++i) points.emplace_back(bytes[i], seconds[i]);
    std::ranges::sort(points);
    std::vector<std::pair<double, double>> curve;
    for (std::size_t i = 0; i < points.size();) {
      std::size_t j = i;
      double sum = 0.0;
      for (; j < points.size() && points[j].first == points[i].first; ++j) sum += points[j].second;
      const double mean = sum / static_cast<double>(j - i);
      curve.emplace_back(points[i].first, curve.empty() ? mean : std::max(mean, curve.back().second));
      i = j;
    }
    return curve;
  }

  /// Seconds at `bytes`: along the measured curve between its sizes (a bucket that fits in
  /// cache costs less per byte than one streamed from memory, which one line cannot say),
  /// beyond the largest along its last segment, below the smallest on the way from the fixed
  /// cost to it; the line where nothing was measured.
  double at(double bytes) const {
    if (curve.size() < 2) return (*this)(bytes);
    if (const auto [b0, s0] = curve.front(); bytes <= b0) return fixed_s + std::max(0.0, s0 - fixed_s) * bytes / b0;
    std::size_t k = 1;
    while (k + 1 < curve.size() && bytes > curve[k].first) ++k;
    const auto [b0, s0] = curve[k - 1];
    const auto [b1, s1] = curve[k];
    return std::max(0.0, s0 + (s1 - s0) * (bytes - b0) / (b1 - b0));
  }

  /// The line through (bytes, seconds) with the least relative error; see fit below.
  static line fit(std::span<const double> bytes, std::span<const double> seconds) {
    return fit(std::vector<double>(bytes.size(), 0.0), bytes, seconds);
  }

  /// The line through (rows, bytes, seconds) with the least relative error (least squares
  /// weighted by 1/seconds^2: a 16 KiB point counts as much as a 16 MiB one, so the fixed
  /// cost is not lost under the large sizes' bytes), no coefficient below zero: of the lines
  /// through any subset of the three terms whose coefficients are all non-negative, the one
  /// that fits best.
  static line fit(std::span<const double> rows, std::span<const double> bytes, std::span<const double> seconds) {
    line best;
    double best_error = INFINITY;
    for (unsigned terms = 1; terms < 8; ++terms) {  // bit 0: fixed, 1: per row, 2: per byte
      const std::optional<line> l = fit_terms(terms, rows, bytes, seconds);
      if (!l) continue;
      double error = 0.0;
      for (std::size_t i = 0; i < seconds.size(); ++i) {
        const double relative = ((*l)(bytes[i], rows[i]) - seconds[i]) / seconds[i];
        error += relative * relative;
      }
      if (error < best_error * (1 - 1e-12)) best_error = error, best = *l;
    }
    return best;
  }

 private:
  // Weighted least squares over the chosen terms (normal equations, Gaussian elimination);
  // nullopt if singular or if a coefficient comes out negative.
  static std::optional<line> fit_terms(unsigned terms, std::span<const double> rows, std::span<const double> bytes,
                                       std::span<const double> seconds) {
    std::vector<int> used;
    for (int t = 0; t < 3; ++t)
      if (terms & (1u << t)) used.push_back(t);
    const std::size_t k = used.size();
    auto feature = [&](int t, std::size_t i) { return t == 0 ? 1.0 : t == 1 ? rows[i] : bytes[i]; };
    std::vector<std::vector<double>> a(k, std::vector<double>(k + 1, 0.0));  // [A | b]
    for (std::size_t i = 0; i < seconds.size(); ++i) {
      if (!(seconds[i] > 0)) continue;
      const double w = 1.0 / (seconds[i] * seconds[i]);
      for (std::size_t r = 0; r < k; ++r) {
        for (std::size_t c = 0; c < k; ++c) a[r][c] += w * feature(used[r], i) * feature(used[c], i);
        a[r][k] += w * feature(used[r], i) * seconds[i];
      }
    }
    for (std::size_t c = 0; c < k; ++c) {
      std::size_t pivot = c;
      for (std::size_t r = c + 1; r < k; ++r)
        if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
      if (std::abs(a[pivot][c]) < 1e-300) return std::nullopt;
      std::swap(a[c], a[pivot]);
      for (std::size_t r = 0; r < k; ++r)
        if (r != c) {
          const double f = a[r][c] / a[c][c];
          for (std::size_t j = c; j <= k; ++j) a[r][j] -= f * a[c][j];
        }
    }
    line l;
    for (std::size_t r = 0; r < k; ++r) {
      const double x = a[r][k] / a[r][r];
      if (!(x >= 0) || !std::isfinite(x)) return std::nullopt;
      (used[r] == 0 ? l.fixed_s : used[r] == 1 ? l.per_row_s : l.per_byte_s) = x;
    }
    return l;
  }
};

/// How busy the other servers are beside the busiest, from each server's load: their load
/// over the busiest's, averaged over the p - 1 of them (0: the others idle, 1: all as busy).
inline double other_servers_busy(std::span<const double> load) {
  if (load.size() < 2) return 0.0;
  const double busiest = *std::ranges::max_element(load);
  if (!(busiest > 0)) return 0.0;
  double others = -busiest;
  for (const double l : load) others += l;
  return others / (busiest * static_cast<double>(load.size() - 1));
}

/// A machine's costs, as measured on `measured_on`.
struct calibration {
  static constexpr int format_version = 4;
  std::string backend = "mpi";
  cluster measured_on;
  std::vector<int> ranks_per_host;  ///< the layout measured: ranks on each host, in host order
  link_class within_host;                 ///< point to point between two ranks of a host
  link_class across_hosts;                ///< between hosts; unknown when measured on one host
  /// Whether a host had two ranks to measure within_host on; with one rank per host it is
  /// the link's copy.
  bool measured_within_host() const {
    return !ranks_per_host.empty() && std::ranges::max(ranks_per_host) > 1;
  }
  // One synchronization of a variable (or fusion bucket) of n fp32 gradient bytes, on
  // measured_on.ranks ranks, through the executor:
  line ring, tree, hierarchical, native;  ///< Replicate, AllReduce<...>
  /// The same with Compress<FP16>, casts included (Ring and Hierarchical cast chunk by chunk
  /// inside their rings, Tree and Native the whole bucket before and after): by the fp32 bytes
  line ring_fp16, tree_fp16, hierarchical_fp16, native_fp16;
  /// A partitioned variable's part that is not one block of memory (Partition<k>, k > 0:
  /// one block per index of the axes before k) costs this much per block beyond its first
  double per_block_s = 0.0;
  /// PS<1> BSP, dense, every shard on one server: per step, per shard (the per-row term: each
  /// worker's push and pull of it) and per byte
  line parameter_server;
  line sparse_parameter_server;  ///< PS<1> BSP, SparseRows: per row each worker touches, and their bytes' curve
  /// How much slower a server works when the other servers are busy too (they share the
  /// cores with the workers): its one-server time times 1 + sharing * other_servers_busy
  double parameter_server_sharing = 0.0, sparse_parameter_server_sharing = 0.0;
  line sparse_allgather;         ///< Replicate, AllReduce, SparseRows: per row of each rank, and their bytes' curve
  std::string created;                    ///< when and where, for people

  /// The line of an all-reduce algorithm, uncompressed or with 16-bit casts (FP16; BF16 is
  /// the same code and bytes).
  const line& allreduce(collective_kind algorithm, bool sixteen_bit) const {
    switch (algorithm) {
      case collective_kind::ring: return sixteen_bit ? ring_fp16 : ring;
      case collective_kind::tree: return sixteen_bit ? tree_fp16 : tree;
      case collective_kind::hierarchical: return sixteen_bit ? hierarchical_fp16 : hierarchical;
      case collective_kind::native: return sixteen_bit ? native_fp16 : native;
      default: throw usage_error("a calibration measures AllReduce<Ring|Tree|Hierarchical|Native>");
    }
  }

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
inline void to_json(nlohmann::json& j, const line& l) {
  j = {{"fixed_s", l.fixed_s}, {"per_byte_s", l.per_byte_s}, {"per_row_s", l.per_row_s}, {"curve", l.curve}};
}

inline void to_json(nlohmann::json& j, const calibration& c) {
  j = {{"format", calibration::format_version},
       {"backend", c.backend},
       {"ranks", c.measured_on.ranks},
       {"ranks_per_host", c.ranks_per_host},
       {"within_host", c.within_host},
       {"across_hosts", c.across_hosts},
       {"allreduce", {{"ring", c.ring}, {"tree", c.tree}, {"hierarchical", c.hierarchical}, {"native", c.native}}},
       {"allreduce_fp16",
        {{"ring", c.ring_fp16}, {"tree", c.tree_fp16}, {"hierarchical", c.hierarchical_fp16}, {"native", c.native_fp16}}},
       {"per_block_s", c.per_block_s},
       {"parameter_server", c.parameter_server},
       {"parameter_server_sharing", c.parameter_server_sharing},
       {"sparse_parameter_server_sharing", c.sparse_parameter_server_sharing},
       {"sparse_parameter_server", c.sparse_parameter_server},
       {"sparse_allgather", c.sparse_allgather},
       {"created", c.created}};
}

namespace detail {

/// A calibration read field by field: every value is checked where it is read, and a refusal
/// names the field by its path ("allreduce.ring.fixed_s") and says what it must be.
class calibration_reader {
 public:
  explicit calibration_reader(const nlohmann::json& root) : root_(root) {}

  const nlohmann::json& at(const std::string& path) const {
    const nlohmann::json* at = &root_;
    for (std::size_t begin = 0; begin <= path.size();) {
      const std::size_t end = std::min(path.find('.', begin), path.size());
      const std::string key = path.substr(begin, end - begin);
      if (!at->is_object() || !at->contains(key)) throw refuse(path, "is missing");
      at = &(*at)[key];
      begin = end + 1;
    }
    return *at;
  }
  /// A number in [low, inf): finite, never negative.
  double seconds_or_rate(const std::string& path) const { return number(at(path), path); }
  int whole(const std::string& path, int low) const { return whole(at(path), path, low); }
  int whole(const nlohmann::json& j, const std::string& path, int low) const {
    if (!j.is_number_integer() || j.get<long long>() < low || j.get<long long>() > (1 << 24))
      throw refuse(path, fmt::format("must be a whole number in [{}, {}], not {}", low, 1 << 24, shown(j)));
    return j.get<int>();
  }
  std::string text(const std::string& path) const {
    const nlohmann::json& j = at(path);
    if (!j.is_string()) throw refuse(path, fmt::format("must be a string, not {}", shown(j)));
    return j.get<std::string>();
  }
  link_class link(const std::string& path) const {
    return {seconds_or_rate(path + ".latency_s"), seconds_or_rate(path + ".bytes_per_s")};
  }
  line fitted(const std::string& path) const {
    line l{seconds_or_rate(path + ".fixed_s"), seconds_or_rate(path + ".per_byte_s"), seconds_or_rate(path + ".per_row_s")};
    const std::string curve = path + ".curve";
    const nlohmann::json& points = at(curve);
    if (!points.is_array()) throw refuse(curve, fmt::format("must be a list of [bytes, seconds], not {}", shown(points)));
    for (std::size_t i = 0; i < points.size(); ++i) {
      const std::string point = fmt::format("{}[{}]", curve, i);
      if (!points[i].is_array() || points[i].size() != 2)
        throw refuse(point, fmt::format("must be [bytes, seconds], not {}", shown(points[i])));
      const double bytes = number(points[i][0], point + "[0]"), seconds = number(points[i][1], point + "[1]");
      // The curve is read between its sizes: a size measured twice would divide by zero.
      if (!l.curve.empty() && !(bytes > l.curve.back().first))
        throw refuse(point, fmt::format("has {} bytes, not more than the point before it ({}): a curve's sizes must "
                                        "increase strictly",
                                        bytes, l.curve.back().first));
      l.curve.emplace_back(bytes, seconds);
    }
    return l;
  }

  usage_error refuse(const std::string& path, const std::string& why) const {
    return usage_error(fmt::format("field \"{}\" {}", path, why));
  }

 private:
  double number(const nlohmann::json& j, const std::string& path) const {
    if (!j.is_number()) throw refuse(path, fmt::format("must be a number, not {}", shown(j)));
    const double value = j.get<double>();
    if (!std::isfinite(value) || value < 0) throw refuse(path, fmt::format("must be a finite number >= 0, not {}", value));
    return value;
  }
  static std::string shown(const nlohmann::json& j) {
    return fmt::format("{} {}", j.type_name(), strata::detail::excerpt(j.dump(-1, ' ', true), 40));
  }

  const nlohmann::json& root_;
};

}  // namespace detail

inline void from_json(const nlohmann::json& j, calibration& c) {
  const detail::calibration_reader in(j);
  if (const int format = in.whole("format", 0); format != calibration::format_version)
    throw usage_error(fmt::format("a calibration file of format {}; this strata reads format {}: recalibrate", format,
                                  calibration::format_version));
  c.backend = in.text("backend");
  c.measured_on.ranks = in.whole("ranks", 2);
  const nlohmann::json& hosts = in.at("ranks_per_host");
  if (!hosts.is_array() || hosts.empty()) throw in.refuse("ranks_per_host", "must be a list of each host's ranks");
  c.ranks_per_host.clear();
  for (std::size_t h = 0; h < hosts.size(); ++h) c.ranks_per_host.push_back(in.whole(hosts[h], fmt::format("ranks_per_host[{}]", h), 1));
  if (const int sum = std::accumulate(c.ranks_per_host.begin(), c.ranks_per_host.end(), 0); sum != c.measured_on.ranks)
    throw in.refuse("ranks_per_host", fmt::format("adds up to {} ranks, but \"ranks\" says {}", sum, c.measured_on.ranks));
  c.measured_on.ranks_per_host = *std::ranges::max_element(c.ranks_per_host);
  c.within_host = in.link("within_host");
  c.across_hosts = in.link("across_hosts");
  c.ring = in.fitted("allreduce.ring");
  c.tree = in.fitted("allreduce.tree");
  c.hierarchical = in.fitted("allreduce.hierarchical");
  c.native = in.fitted("allreduce.native");
  c.ring_fp16 = in.fitted("allreduce_fp16.ring");
  c.tree_fp16 = in.fitted("allreduce_fp16.tree");
  c.hierarchical_fp16 = in.fitted("allreduce_fp16.hierarchical");
  c.native_fp16 = in.fitted("allreduce_fp16.native");
  c.per_block_s = in.seconds_or_rate("per_block_s");
  c.parameter_server = in.fitted("parameter_server");
  c.parameter_server_sharing = in.seconds_or_rate("parameter_server_sharing");
  c.sparse_parameter_server_sharing = in.seconds_or_rate("sparse_parameter_server_sharing");
  c.sparse_parameter_server = in.fitted("sparse_parameter_server");
  c.sparse_allgather = in.fitted("sparse_allgather");
  c.created = in.text("created");
}

/// What in `c` cannot be a measurement of the links, each as a sentence that says what to
/// change; empty when nothing is in doubt. Predictions from a doubtful calibration are off.
inline std::vector<std::string> doubts(const calibration& c) {
  std::vector<std::string> found;
  // A rate no host link reaches: the 8 MiB exchange took hardly longer than the 8-byte one.
  auto implausible = [&](const char* name, const link_class& link) {
    if (link.bytes_per_s > 1e12)
      found.push_back(fmt::format("{}, 8 MiB took hardly longer than 8 bytes ({:.0f} GB/s): the link's latency is "
                                  "noise; measure again, with more --repeats",
                                  name, link.bytes_per_s / 1e9));
  };
  if (c.measured_within_host()) implausible("within a host", c.within_host);  // else the link's copy, told once
  implausible("across hosts", c.across_hosts);
  // Ranks of one host spinning in blocking calls on fewer cores than ranks each wait for the
  // scheduler: a message within the host then takes milliseconds, far longer than across
  // hosts (where the two are close, e.g. on a slow link with yielding ranks, noise decides).
  if (c.measured_within_host() && c.across_hosts.known() && c.within_host.latency_s > 2 * c.across_hosts.latency_s)
    found.push_back(fmt::format(
        "a message within a host took over twice as long ({:.1f} us) as across hosts ({:.1f} us): a host's ranks "
        "are likely short of cores while MPI spins in its blocking calls; run no more ranks than cores per host, "
        "or let MPI yield (OpenMPI: OMPI_MCA_mpi_yield_when_idle=1), and calibrate again",
        1e6 * c.within_host.latency_s, 1e6 * c.across_hosts.latency_s));
  return found;
}

/// The calibration for people: links, then each family's fixed cost and rates, then doubts.
inline std::string describe(const calibration& c) {
  auto us = [](double s) { return 1e6 * s; };
  std::string out = fmt::format("calibration of {}\n  within a host: {:.1f} us, {:.2f} GB/s", c.created, us(c.within_host.latency_s),
                                c.within_host.bytes_per_s / 1e9);
  if (c.across_hosts.known())
    out += fmt::format("; across hosts: {:.1f} us, {:.2f} GB/s", us(c.across_hosts.latency_s), c.across_hosts.bytes_per_s / 1e9);
  out += "\n";
  for (const auto& [name, l] : {std::pair{"ring", c.ring}, {"tree", c.tree}, {"hierarchical", c.hierarchical}, {"native", c.native},
                                {"ring, FP16", c.ring_fp16}, {"tree, FP16", c.tree_fp16},
                                {"hierarchical, FP16", c.hierarchical_fp16}, {"native, FP16", c.native_fp16},
                                {"parameter server", c.parameter_server}, {"sparse parameter server", c.sparse_parameter_server},
                                {"sparse all-gather", c.sparse_allgather}}) {
    out += l.per_byte_s > 0 ? fmt::format("  {:<24} {:8.1f} us + bytes at {:6.2f} GB/s", name, us(l.fixed_s), 1e-9 / l.per_byte_s)
                            : fmt::format("  {:<24} {:8.1f} us + bytes along the curve", name, us(l.fixed_s));
    if (l.per_row_s > 0) out += fmt::format(" + {:.3f} us per row", us(l.per_row_s));
    out += "\n";
  }
  out += fmt::format("  servers busy together    dense x{:.2f}, sparse x{:.2f} (all other servers busy)\n",
                     1 + c.parameter_server_sharing, 1 + c.sparse_parameter_server_sharing);
  out += fmt::format("  partitioned blocks       {:8.3f} us per block beyond a part's first\n", us(c.per_block_s));
  for (const std::string& doubt : doubts(c)) out += fmt::format("  doubtful: {}\n", doubt);
  return out;
}

/// Writes `c` to `file` as JSON.
inline void save(const calibration& c, const std::filesystem::path& file) {
  std::ofstream out(file);
  out << nlohmann::json(c).dump(2) << '\n';
  if (!out.flush())
    throw output_error(fmt::format("cannot write the calibration to \"{}\" ({})", file.string(), std::strerror(errno)));
}

/// Reads a calibration from `file`; usage_error naming the file when it is missing, a
/// folder, not JSON (with the byte), or not a calibration (with the field and what it must be).
inline calibration load(const std::filesystem::path& file) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec))
    throw usage_error(fmt::format("the calibration \"{}\" is a folder; give the file strata-calibrate --output wrote",
                                  file.string()));
  std::ifstream in(file);
  if (!in) throw usage_error(fmt::format("cannot read the calibration \"{}\"; make one with strata-calibrate", file.string()));
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann quotes the bytes it read last; a damaged file's bytes are not echoed.
    throw usage_error(fmt::format("the calibration \"{}\" is not JSON (byte {}); recalibrate with strata-calibrate",
                                  file.string(), e.byte));
  } catch (const nlohmann::json::exception&) {  // a number beyond a double's range
    throw usage_error(fmt::format("the calibration \"{}\" holds a number out of range; recalibrate with strata-calibrate",
                                  file.string()));
  } catch (const std::ios_base::failure&) {  // the file system's read failed (EIO)
    throw usage_error(fmt::format("cannot read the calibration \"{}\" ({}); give a readable copy, or recalibrate with "
                                  "strata-calibrate",
                                  file.string(), std::strerror(errno)));
  }
  try {
    return json.get<calibration>();
  } catch (const usage_error& e) {
    throw usage_error(fmt::format("the calibration \"{}\" is refused: {}", file.string(), e.what()));
  }
}

}  // namespace strata::plan
