#pragma once
// A mesh factors the world into three named axes: data (dp), tensor (tp) and pipeline (pp).
// Every rank has a coordinate on each axis, and for each axis one group: the ranks that
// differ from it only along that axis. Each group is a CommContext of its own, so what
// strata already does over a world, it does over a group: the executor averages a stage's
// gradients over its data group, tensor-parallel layers sum partial results over their
// tensor group (tensor_parallel.hpp), the pipeline driver passes activations along the
// pipeline group (pipeline.hpp).
//
//   strata::mpi::context ctx(argc, argv);
//   strata::mesh mesh(ctx, strata::parse_mesh("dp=2,tp=2,pp=1", ctx.size()));
//   auto exec = make_executor(mesh, model, optimizer);  // averages over dp; checkpoints hold the whole model
//
// Ranks are laid out tensor fastest, then data, then pipeline (Megatron-LM's order): the
// ranks of a tensor group are neighbours, so on real machines they share a node and its
// fast links, and pipeline stages, which exchange the least, sit furthest apart.
#include <array>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "strata/comm/communicator.hpp"
#include "strata/detail/text.hpp"
#include "strata/error.hpp"
#include "strata/exec/timeout.hpp"
#include "strata/exec/wait_chain.hpp"

namespace strata {

enum class mesh_axis { data, tensor, pipeline };

inline constexpr std::array<mesh_axis, 3> mesh_axes = {mesh_axis::data, mesh_axis::tensor, mesh_axis::pipeline};

/// The axis's name in `--mesh` text: dp, tp, pp.
constexpr std::string_view axis_name(mesh_axis a) {
  return a == mesh_axis::data ? "dp" : a == mesh_axis::tensor ? "tp" : "pp";
}

/// A position on every axis (or, for mesh_shape, the extent of every axis).
struct mesh_coordinates {
  int dp = 0, tp = 0, pp = 0;

  constexpr int operator[](mesh_axis a) const { return a == mesh_axis::data ? dp : a == mesh_axis::tensor ? tp : pp; }
  constexpr int& operator[](mesh_axis a) { return a == mesh_axis::data ? dp : a == mesh_axis::tensor ? tp : pp; }
  friend constexpr bool operator==(const mesh_coordinates&, const mesh_coordinates&) = default;
};

/// How many ranks each axis has.
struct mesh_shape {
  int dp = 1, tp = 1, pp = 1;

  constexpr int operator[](mesh_axis a) const { return a == mesh_axis::data ? dp : a == mesh_axis::tensor ? tp : pp; }
  /// In 64 bits, saturating: three int axes can overflow int, and a wrapped product could
  /// equal the job's size.
  constexpr std::int64_t ranks() const {
    std::int64_t n = 1;
    for (const int a : {dp, tp, pp})
      if (__builtin_mul_overflow(n, static_cast<std::int64_t>(a), &n)) return INT64_MAX;
    return n;
  }

  /// The coordinates of world rank `rank`: tensor fastest, then data, then pipeline.
  constexpr mesh_coordinates coordinates(int rank) const {
    return {rank / tp % dp, rank % tp, rank / (tp * dp)};
  }
  /// The world rank at `c`.
  constexpr int rank(mesh_coordinates c) const { return c.tp + tp * (c.dp + dp * c.pp); }

  friend constexpr bool operator==(const mesh_shape&, const mesh_shape&) = default;
};

/// "rank 5 (dp=0,tp=1,pp=1)": how messages name a rank of a mesh of `shape`.
inline std::string describe_rank(const mesh_shape& shape, int world_rank) {
  const mesh_coordinates c = shape.coordinates(world_rank);
  return fmt::format("rank {} (dp={},tp={},pp={})", world_rank, c.dp, c.tp, c.pp);
}

/// "dp=2,tp=2,pp=1", as the mesh it names.
inline std::string to_string(const mesh_shape& s) { return fmt::format("dp={},tp={},pp={}", s.dp, s.tp, s.pp); }

/// Parses `text` ("dp=2,tp=2,pp=1"; spaces allowed around items) for a world of
/// `world_size` ranks. Axes left out have one rank, except dp, which when left out takes the
/// ranks the others leave ("tp=2" on 8 ranks is dp=4,tp=2,pp=1). Throws usage_error naming
/// the item at fault for an unknown or repeated axis, a count that is not a positive integer,
/// or axes whose product is not the world size.
inline mesh_shape parse_mesh(std::string_view text, int world_size) {
  const std::string quoted = fmt::format("--mesh \"{}\"", detail::excerpt(text));
  std::array<int, 3> given = {0, 0, 0};  // 0: not given
  auto index = [](mesh_axis a) { return static_cast<std::size_t>(a); };
  std::string_view rest = text;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    const std::size_t equals = item.find('=');
    if (equals == std::string_view::npos)
      throw usage_error(fmt::format("{}: \"{}\" is not axis=count; write e.g. dp=2,tp=2,pp=1", quoted, item));
    const std::string_view name = item.substr(0, equals), count = item.substr(equals + 1);
    const mesh_axis* axis = nullptr;
    for (const mesh_axis& a : mesh_axes)
      if (axis_name(a) == name) axis = &a;
    if (!axis)
      throw usage_error(fmt::format("{}: \"{}\" is not an axis; the axes are dp (data), tp (tensor) and pp (pipeline)",
                                    quoted, name));
    if (given[index(*axis)] != 0)
      throw usage_error(fmt::format("{}: {} is given twice; give each axis once", quoted, name));
    int n = 0;
    const auto [end, status] = std::from_chars(count.data(), count.data() + count.size(), n);
    if (status != std::errc() || end != count.data() + count.size() || n < 1)
      throw usage_error(fmt::format("{}: {}={} is not a positive number of ranks{}", quoted, name, detail::excerpt(count),
                                    status == std::errc::result_out_of_range ? " (it is too large)" : ""));
    if (n > world_size)
      throw usage_error(fmt::format("{}: {}={} is more ranks than the job has ({})", quoted, name, n, world_size));
    given[index(*axis)] = n;
  }
  mesh_shape shape{given[0] == 0 ? 1 : given[0], given[1] == 0 ? 1 : given[1], given[2] == 0 ? 1 : given[2]};
  const std::int64_t tp_pp = static_cast<std::int64_t>(shape.tp) * shape.pp;
  if (given[0] == 0 && world_size % tp_pp == 0) shape.dp = static_cast<int>(world_size / tp_pp);
  if (shape.ranks() != world_size)
    throw usage_error(fmt::format("{}: {} makes {} ranks, but the job has {}; the axes' product must be the number of ranks",
                                  quoted, to_string(shape), shape.ranks(), world_size));
  return shape;
}

/// The ranks of one mesh group, as a CommContext: the parent's three communicators split
/// alike (collectives, parameter server, control), so every executor, synchronizer and
/// checkpoint runs over the group as it would over a world. Giving up (a deadline) ends the
/// whole job, as the parent's abort() does.
template <CommContext Parent>
class group_context {
  template <class C>
  using comm_t = std::remove_reference_t<C>;

 public:
  using collectives_type = comm_t<decltype(std::declval<Parent&>().collectives())>;
  using parameter_server_type = comm_t<decltype(std::declval<Parent&>().parameter_server())>;
  using control_type = comm_t<decltype(std::declval<Parent&>().control())>;

  /// Collective over `parent`: ranks of one `color` form a group, ordered by `key`.
  /// `describe(r)` names the group's rank r in messages (a deadline's): by default "rank r"
  /// of the group; a mesh names its world rank and coordinates, and `describe_job_rank`
  /// any rank of the whole job likewise. `timeout` bounds the waits of the group's tensor
  /// collectives (tensor_parallel.hpp).
  group_context(Parent& parent, int color, int key, std::function<std::string(int)> describe = {},
                std::function<std::string(int)> describe_job_rank = {},
                std::chrono::duration<double> timeout = default_timeout())
      : parent_(&parent), collectives_(parent.collectives().split(color, key)),
        parameter_server_(parent.parameter_server().split(color, key)), control_(parent.control().split(color, key)),
        describe_(std::move(describe)), describe_job_rank_(std::move(describe_job_rank)),
        timeout_(checked_timeout(timeout.count(), "the mesh's timeout")), job_ranks_(static_cast<std::size_t>(size())) {
    const int mine = strata::job_rank(parent, parent.control().rank());
    control_.allgather(std::span<const int>(&mine, 1), std::span<int>(job_ranks_));
  }

  int rank() const { return control_.rank(); }
  int size() const { return control_.size(); }
  collectives_type& collectives() { return collectives_; }
  parameter_server_type& parameter_server() { return parameter_server_; }
  control_type& control() { return control_; }
  void abort() { parent_->abort(); }

  /// How messages name the group's rank `r`.
  std::string describe(int r) const { return describe_ ? describe_(r) : fmt::format("rank {} of the group", r); }

  /// The whole job's control channel, where a long wait says whom it waits for (wait_chain.hpp).
  auto& job_control() { return strata::job_control(*parent_); }
  /// The job rank of the group's rank `r`.
  int job_rank(int r) const { return job_ranks_.at(static_cast<std::size_t>(r)); }
  /// How messages name rank `r` of the whole job.
  std::string describe_job_rank(int r) const {
    return describe_job_rank_ ? describe_job_rank_(r) : strata::describe_job_rank(*parent_, r);
  }
  /// How long the group's tensor collectives wait for its ranks.
  std::chrono::duration<double> timeout() const { return timeout_; }

 private:
  Parent* parent_;
  collectives_type collectives_;
  parameter_server_type parameter_server_;
  control_type control_;
  std::function<std::string(int)> describe_, describe_job_rank_;
  std::chrono::duration<double> timeout_;
  std::vector<int> job_ranks_;  // the group's ranks' ranks in the whole job
};

/// A world factored into a mesh: this rank's coordinates and its group along each axis.
/// Collective over `world`, which must outlive the mesh.
template <CommContext Context>
class mesh {
 public:
  /// `timeout`: how long the tensor groups' collectives wait (the executor and the pipeline
  /// driver take theirs in their options).
  mesh(Context& world, mesh_shape shape, std::chrono::duration<double> timeout = default_timeout())
      : world_(&world), shape_(checked(world, shape)), at_(shape_.coordinates(world.control().rank())),
        data_(world, color_without(mesh_axis::data), at_.dp, describer(mesh_axis::data), describer(), timeout),
        tensor_(world, color_without(mesh_axis::tensor), at_.tp, describer(mesh_axis::tensor), describer(), timeout),
        pipeline_(world, color_without(mesh_axis::pipeline), at_.pp, describer(mesh_axis::pipeline), describer(), timeout) {}

  const mesh_shape& shape() const { return shape_; }
  /// The whole job the mesh factors.
  Context& world() { return *world_; }
  /// This rank's place on every axis.
  const mesh_coordinates& coordinates() const { return at_; }

  /// The ranks that differ from this one only in their data coordinate: replicas of the
  /// same shard of the same stage, whose gradients are averaged.
  group_context<Context>& data() { return data_; }
  /// The ranks that share this rank's data and pipeline coordinates: together they hold
  /// one copy of the stage's tensor-parallel layers.
  group_context<Context>& tensor() { return tensor_; }
  /// The ranks that share this rank's data and tensor coordinates: the stages of one
  /// pipeline, in stage order.
  group_context<Context>& pipeline() { return pipeline_; }
  group_context<Context>& group(mesh_axis a) {
    return a == mesh_axis::data ? data_ : a == mesh_axis::tensor ? tensor_ : pipeline_;
  }

  /// "rank 5 (dp=0,tp=1,pp=1)": how messages name a rank of the mesh.
  std::string describe(int world_rank) const { return describe_rank(shape_, world_rank); }

 private:
  static mesh_shape checked(Context& world, mesh_shape shape) {
    if (shape.dp < 1 || shape.tp < 1 || shape.pp < 1 || shape.ranks() != world.control().size())
      throw usage_error(fmt::format("mesh {} makes {} ranks, but the job has {}; the axes' product must be the number of "
                                    "ranks, each axis at least 1",
                                    to_string(shape), shape.ranks(), world.control().size()));
    return shape;
  }

  /// Names the ranks of this rank's `a` group by world rank and coordinates. It copies the
  /// shape and coordinates, so the groups stay right if the mesh object moves.
  std::function<std::string(int)> describer(mesh_axis a) const {
    return [shape = shape_, at = at_, a](int index) {
      mesh_coordinates c = at;
      c[a] = index;
      const std::string rank = describe_rank(shape, shape.rank(c));
      return a == mesh_axis::pipeline ? fmt::format("stage {}, {}", index, rank) : rank;
    };
  }

  /// Names ranks of the whole job by world rank and coordinates, where the mesh factors the
  /// whole job; a mesh over a group leaves that to the group.
  std::function<std::string(int)> describer() const {
    if constexpr (requires(Context& c) { c.job_control(); }) return {};
    else return [shape = shape_](int rank) { return describe_rank(shape, rank); };
  }

  /// Equal exactly for the ranks whose coordinates agree on every axis but `a`.
  int color_without(mesh_axis a) const {
    mesh_coordinates c = at_;
    c[a] = 0;
    return shape_.rank(c);
  }

  Context* world_;
  mesh_shape shape_;
  mesh_coordinates at_;
  group_context<Context> data_, tensor_, pipeline_;
};

}  // namespace strata
