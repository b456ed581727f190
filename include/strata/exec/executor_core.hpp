#pragma once
// What an executor does whatever its model's strategies: the deadline on collective work and
// the ranks a stall names, arrival announcements, the communication thread, and, on a mesh,
// the tensor group's checks of whole variables and where checkpoint tensors lie in the whole
// model. It depends on the backend (Context) alone, so a program instantiates it once per
// backend, not once per model; under STRATA_SEPARATE_COMPILATION the MPI backend's is
// compiled with strata's non-template code (strata/impl/instances.hpp).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "strata/ckpt/exchange.hpp"
#include "strata/comm/communicator.hpp"
#include "strata/config.hpp"
#include "strata/debug.hpp"
#include "strata/error.hpp"
#include "strata/exec/timeout.hpp"
#include "strata/exec/wait_chain.hpp"
#include "strata/model/variable.hpp"
#include "strata/parallel/mesh.hpp"
#include "strata/strategy/builders.hpp"
#include "strata/strategy/descriptor.hpp"
#include "strata/sync/allreduce/algorithm.hpp"
#include "strata/sync/bucket_plan.hpp"
#include "strata/sync/comm_thread.hpp"
#include "strata/sync/compress/bucket.hpp"
#include "strata/timeout_setting.hpp"

namespace strata {

struct executor_options {
  sync::bucket_options buckets;
  sync::allreduce_options allreduce;
  sync::compression_options compression;
  /// Micro-batches per update: gradients of K-1 micro-batches are accumulated locally and
  /// only the K-th communicates.
  int accumulation_steps = 1;
  /// How long step() waits for other ranks before it reports the ranks that did not arrive
  /// and aborts the job (MPI: mpirun exits non-zero) instead of hanging.
  std::chrono::duration<double> timeout = default_timeout();
  /// Which ranks host parameter-server shards: balanced by bytes, or all on rank 0 (what
  /// `builder::PS` asks for: pass `B::servers`). Must be equal on every rank (checked).
  server_assignment ps_servers = server_assignment::least_loaded;
  /// The per-step checks of STRATA_DEBUG=detail (debug.hpp), on by default only there: every
  /// bucket scanned for NaN and infinity (compression.scan_uncompressed), and the buffers
  /// bound from a std::vector checked to be where they were bound.
  bool detail_checks = debug_detail();
};

namespace detail {
/// Returns `o`, with every bucket scanned under detail checks; throws usage_error for options
/// no executor can run with.
STRATA_DECL executor_options check_options(executor_options o);

/// Detail checks: a buffer bound from a std::vector that has since reallocated would be read
/// after it was freed (and its garbage blamed on the learning rate); throws binding_error.
STRATA_DECL void require_buffers_in_place(std::span<const variable_binding> variables);
}  // namespace detail

/// Where an executor's variables lie in a mesh (make_executor over a mesh gives it): its
/// checkpoints are then collective over the whole world, whose ranks hold different parts
/// of the model, and each tensor-parallel part is saved as its place in the whole tensor,
/// so a checkpoint restores into any other mesh, or into one rank.
template <class ControlComm>
struct mesh_placement {
  ControlComm* world = nullptr;   ///< the world's control communicator
  ControlComm* tensor = nullptr;  ///< the tensor group's: its ranks hold the whole variables alike
  mesh_shape shape;
  mesh_coordinates at;
};

/// The executor's part that knows the backend but not the model: one per executor. The
/// variables it checks are passed in (the model's, bound before the executor was made), with
/// their strategies' descriptors given at construction, variable by variable.
template <CommContext Context>
class executor_core {
 public:
  using control_type = std::remove_reference_t<decltype(std::declval<Context&>().control())>;
  using placement_type = mesh_placement<control_type>;

  executor_core(Context& context, const executor_options& options, std::optional<placement_type> placement,
                std::vector<strategy_descriptor> descriptors);
  ~executor_core();
  executor_core(const executor_core&) = delete;
  executor_core& operator=(const executor_core&) = delete;

  Context& context() const { return *context_; }
  const executor_options& options() const { return options_; }
  const std::optional<placement_type>& placement() const { return placement_; }
  const strategy_descriptor& descriptor_of(std::size_t variable) const { return descriptors_[variable]; }
  sync::comm_thread& thread() { return *thread_; }
  /// Drains and ends the communication thread: before the buffers its work uses go away.
  void stop_thread() { thread_.reset(); }

  /// The ranks that save and restore checkpoints together: the world, on a mesh.
  control_type& checkpoint_control() const { return placement_ ? *placement_->world : context_->control(); }

  /// When a wait that starts now gives up.
  std::chrono::steady_clock::time_point deadline_from_now() const {
    return std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(options_.timeout);
  }

  // Arrival announcements: when a rank reaches an update (its backward pass done) it tells
  // every other rank, on the control communicator. If a collective then stalls, the
  // announcements that never came name the ranks that are missing: a rank stopped in the
  // middle of its backward pass has not announced, though it may have started some buckets'
  // all-reduces.
  /// Announces this rank's arrival at `update` (once until collected).
  void announce(std::int64_t update);
  /// Receives every other rank's announcement and completes this rank's.
  void collect_announcements();

  /// Runs the collective work `f` on the communication thread, announced as `update`, and
  /// waits for it until the deadline; if it does not finish, gives up saying what it was
  /// `doing` and naming the ranks that never arrived.
  void within_deadline(std::string_view doing, std::int64_t update, std::function<void()> f);

  /// While a step waits: once half its deadline is gone, tells the job's ranks which rank of
  /// the group it waits for (the first that has not announced the update), if any.
  auto watch_waits() {
    using watch_type = std::remove_reference_t<decltype(*watch_)>;
    return typename watch_type::scope(watch_.get(), options_.timeout, [this] { return first_unannounced_job_rank(); });
  }

  /// A collective stalled: names the ranks that never announced this update (or, where ranks
  /// announce nothing, as under ASP and SSP, the ranks the wait was for), tells the user, and
  /// aborts the job so that no rank hangs (with MPI, mpirun exits non-zero).
  [[noreturn]] void give_up(std::string_view stalled, std::span<const int> waited_for = {});

  /// Start-up, before the data group's broadcast: whole variables take the tensor group's
  /// rank 0's values, so that every rank of a stage starts from the same whole tensors
  /// whatever each initialized. Only those that differ move, and the stage's first rank
  /// names them: a part of a split weight declared without TensorParallel<Axis> looks the
  /// same here (require_whole_variables_alike refuses it before a checkpoint).
  void start_whole_variables_alike(std::span<const variable_binding> variables);

  /// Before a checkpoint: the tensor group's copies of each whole replicated variable must be
  /// equal, or one rank's values would be saved as everyone's. A weight that each tensor rank
  /// holds a part of, declared without TensorParallel<Axis>, differs here after its first
  /// update. Every rank of the world throws usage_error, so none waits in the checkpoint for
  /// ranks that left it.
  void require_whole_variables_alike(std::string_view when, std::span<const variable_binding> variables);

  /// Says where each state tensor lies in the whole model: a tensor-parallel part as the
  /// rows of the whole tensor it covers (one range per index before its axis), held alike by
  /// the data group; a whole tensor as held alike by every rank of the stage (its data and
  /// tensor groups), so that each of them writes a part. Only on a mesh.
  void place_on_mesh(ckpt::state_set& set, std::span<const variable_binding> variables) const;

  /// The bytes of `set` that every rank of the tensor group holds alike (replicated state of
  /// variables not split by TensorParallel); 0 without a tensor group.
  std::size_t tensor_group_copies(const ckpt::state_set& set, std::span<const variable_binding> variables) const;

 private:
  /// What a tensor group compares of each whole variable: its size and a fingerprint.
  struct whole_values {
    std::uint64_t elements;
    std::uint32_t fingerprint, unused = 0;
  };

  /// The tensor-parallel axis of the variable a state tensor belongs to (its name is the
  /// variable's, or the variable's followed by "/"), or -1.
  int tensor_axis_of(std::string_view tensor, std::span<const variable_binding> variables) const;
  /// The variables each rank of the tensor group holds whole (no TensorParallel<Axis>), the
  /// replicated ones only or those of any placement; and what the group's ranks hold of
  /// them, rank after rank. Empty without a tensor group.
  std::pair<std::vector<std::size_t>, std::vector<whole_values>> tensor_group_values(
      std::span<const variable_binding> variables, bool replicated_only);
  /// The first rank of the tensor group whose `field` of whole variable k (of n per rank)
  /// differs from rank 0's, or 0 where none does.
  static std::size_t first_rank_differing(const std::vector<whole_values>& all, std::size_t n, std::size_t k,
                                          bool fingerprint);
  /// How messages name rank `r` of this rank's tensor group.
  std::string tensor_rank_named(int r) const;
  /// The job rank of the first rank of the group that has not announced, or -1.
  int first_unannounced_job_rank();
  /// "rank 2", "ranks 1, 3"; in a mesh's group, each rank's world rank and coordinates.
  std::string ranks_named(std::span<const int> ranks) const;

  static constexpr int announce_tag = 0x4842;

  Context* context_;
  executor_options options_;
  std::optional<placement_type> placement_;
  std::vector<strategy_descriptor> descriptors_;  // variable by variable
  std::unique_ptr<sync::comm_thread> thread_;
  std::unique_ptr<wait_watch<std::remove_reference_t<decltype(job_control(std::declval<Context&>()))>>> watch_;
  bool announced_ = false;
  double announced_update_ = 0.0;
  std::vector<typename control_type::request> announcements_;
};

// ---- definitions: out of the class, so that an explicit instantiation declaration
// (strata/impl/instances.hpp) keeps a program's units from compiling them again.

template <CommContext Context>
executor_core<Context>::executor_core(Context& context, const executor_options& options,
                                      std::optional<placement_type> placement, std::vector<strategy_descriptor> descriptors)
    : context_(&context), options_(detail::check_options(options)), placement_(std::move(placement)),
      descriptors_(std::move(descriptors)), thread_(std::make_unique<sync::comm_thread>()) {
  // On a mesh, pipeline stages and tensor partners may wait for this rank while its step
  // waits for another: it says whom it waits for (wait_chain.hpp).
  if constexpr (requires { context.job_control(); })
    watch_ = std::make_unique<typename decltype(watch_)::element_type>(job_control(context));
}

template <CommContext Context>
executor_core<Context>::~executor_core() = default;

template <CommContext Context>
void executor_core<Context>::announce(std::int64_t update) {
  if (announced_) return;
  announced_ = true;
  announced_update_ = static_cast<double>(update);
  auto& control = context_->control();
  for (int r = 0; r < control.size(); ++r)
    if (r != control.rank()) announcements_.push_back(control.isend(std::span<const double>(&announced_update_, 1), r, announce_tag));
}

template <CommContext Context>
void executor_core<Context>::collect_announcements() {
  auto& control = context_->control();
  double update = 0.0;
  for (int r = 0; r < control.size(); ++r)
    if (r != control.rank()) {
      auto request = control.irecv(std::span<double>(&update, 1), r, announce_tag);
      control.wait(request);
    }
  for (auto& request : announcements_) control.wait(request);
  announcements_.clear();
  announced_ = false;
}

template <CommContext Context>
void executor_core<Context>::within_deadline(std::string_view doing, std::int64_t update, std::function<void()> f) {
  announce(update);
  std::future<void> done = thread_->submit(std::move(f));
  if (done.wait_for(options_.timeout) == std::future_status::timeout) give_up(doing);
  try {
    done.get();
  } catch (...) {
    // Every rank announced before `f`, so the announcements can be received; leaving them
    // would leave a send from a buffer that is about to go away and a message that the next
    // executor on this context would take for its own.
    collect_announcements();
    throw;
  }
  collect_announcements();
}

template <CommContext Context>
int executor_core<Context>::first_unannounced_job_rank() {
  auto& control = context_->control();
  for (int r = 0; r < control.size(); ++r)
    if (announced_ && r != control.rank() && !control.iprobe(r, announce_tag)) return job_rank(*context_, r);
  return -1;
}

template <CommContext Context>
void executor_core<Context>::give_up(std::string_view stalled, std::span<const int> waited_for) {
  auto& control = context_->control();
  std::string who;
  if (announced_) {
    std::vector<int> missing;
    for (int r = 0; r < control.size(); ++r)
      if (r != control.rank() && !control.iprobe(r, announce_tag)) missing.push_back(r);
    who = missing.empty() ? std::string("every rank reached this step, so the collective itself is stuck")
                          : blamed_ranks(*context_, missing, "reach this step");
  } else if (!waited_for.empty()) {
    who = fmt::format("{} did not answer (stopped, or too slow)", ranks_named(waited_for));
  } else {
    who = "no rank could be named (under ASP and SSP ranks do not announce their steps)";
  }
  const std::string message =
      fmt::format("strata ({}): no progress for {:.1f} s: {}; {}. Raise executor_options::timeout or "
                  "STRATA_TIMEOUT_SECONDS if the ranks are only slow",
                  ranks_named(std::array{control.rank()}), options_.timeout.count(), stalled, who);
  abort_after_deadline(*context_, message);
}

template <CommContext Context>
std::string executor_core<Context>::ranks_named(std::span<const int> ranks) const {
  if constexpr (requires(const Context& c) { c.describe(0); }) {
    std::vector<std::string> names;
    for (int r : ranks) names.push_back(context_->describe(r));
    return fmt::format("{}", fmt::join(names, ", "));
  } else {
    return fmt::format("rank{} {}", ranks.size() > 1 ? "s" : "", fmt::join(ranks, ", "));
  }
}

template <CommContext Context>
int executor_core<Context>::tensor_axis_of(std::string_view tensor, std::span<const variable_binding> variables) const {
  std::size_t best = 0;
  int axis = -1;
  for (std::size_t i = 0; i < variables.size(); ++i) {
    const std::string& name = variables[i].name;
    const bool owns = tensor == name || (tensor.starts_with(name) && tensor.size() > name.size() && tensor[name.size()] == '/');
    if (owns && name.size() >= best) best = name.size(), axis = descriptors_[i].tensor_axis;
  }
  return axis;
}

template <CommContext Context>
void executor_core<Context>::place_on_mesh(ckpt::state_set& set, std::span<const variable_binding> variables) const {
  const mesh_shape& shape = placement_->shape;
  const mesh_coordinates& at = placement_->at;
  set.replace_tensors([&](const ckpt::tensor_state& t) {
    std::vector<ckpt::tensor_state> placed;
    const int axis = tensor_axis_of(t.name, variables);
    if (t.how == ckpt::sharing::rank_local) {
      placed.push_back(t);
    } else if (axis < 0 || shape.tp == 1) {
      ckpt::tensor_state whole = t;
      // A parameter-server shard is hosted alike by each tensor group's servers.
      const bool replicated = t.how == ckpt::sharing::replicated;
      whole.holders = replicated ? shape.dp * shape.tp : shape.tp;
      whole.holder = replicated ? at.tp * shape.dp + at.dp : at.tp;
      placed.push_back(std::move(whole));
    } else {
      const auto a = static_cast<std::size_t>(axis);
      std::vector<std::size_t> whole_shape = t.shape;
      whole_shape[a] *= static_cast<std::size_t>(shape.tp);
      std::size_t outer = 1, inner = 1;
      for (std::size_t d = 0; d < a; ++d) outer *= t.shape[d];
      for (std::size_t d = a + 1; d < t.shape.size(); ++d) inner *= t.shape[d];
      const std::size_t count = t.shape[a], piece = count * inner;
      for (std::size_t o = 0; o < outer; ++o)
        placed.push_back({t.name, whole_shape, ckpt::sharing::sharded, t.data.subspan(o * piece, piece), t.optional,
                          (o * whole_shape[a] + static_cast<std::size_t>(at.tp) * count) * inner, shape.dp, at.dp});
    }
    return placed;
  });
}

template <CommContext Context>
std::size_t executor_core<Context>::tensor_group_copies(const ckpt::state_set& set,
                                                        std::span<const variable_binding> variables) const {
  if (!placement_ || placement_->shape.tp == 1) return 0;
  std::size_t bytes = 0;
  for (const ckpt::tensor_state& t : set.tensors())
    if (t.how == ckpt::sharing::replicated && tensor_axis_of(t.name, variables) < 0) bytes += t.data.size_bytes();
  return bytes;
}

template <CommContext Context>
auto executor_core<Context>::tensor_group_values(std::span<const variable_binding> variables, bool replicated_only)
    -> std::pair<std::vector<std::size_t>, std::vector<whole_values>> {
  if (!placement_ || placement_->shape.tp == 1) return {};
  std::vector<std::size_t> whole;
  std::vector<whole_values> mine;
  for (std::size_t i = 0; i < variables.size(); ++i) {
    const strategy_descriptor& d = descriptors_[i];
    if (d.tensor_parallel() || (replicated_only && d.placement != placement_kind::replicate)) continue;
    whole.push_back(i);
    const std::span<const float> param = variables[i].param;
    mine.push_back({param.size(), fingerprint_of(param)});
  }
  std::vector<whole_values> all(mine.size() * static_cast<std::size_t>(placement_->shape.tp));
  placement_->tensor->allgather(std::span<const whole_values>(mine), std::span<whole_values>(all));
  return {std::move(whole), std::move(all)};
}

template <CommContext Context>
std::size_t executor_core<Context>::first_rank_differing(const std::vector<whole_values>& all, std::size_t n,
                                                         std::size_t k, bool fingerprint) {
  auto field = [&](const whole_values& v) { return fingerprint ? std::uint64_t{v.fingerprint} : v.elements; };
  for (std::size_t r = 1; r * n < all.size(); ++r)
    if (field(all[r * n + k]) != field(all[k])) return r;
  return 0;
}

template <CommContext Context>
std::string executor_core<Context>::tensor_rank_named(int r) const {
  mesh_coordinates c = placement_->at;
  c.tp = r;
  return describe_rank(placement_->shape, placement_->shape.rank(c));
}

template <CommContext Context>
void executor_core<Context>::start_whole_variables_alike(std::span<const variable_binding> variables) {
  const auto [whole, all] = tensor_group_values(variables, false);
  const std::size_t n = whole.size();
  std::vector<std::string> moved;
  for (std::size_t k = 0; k < n; ++k) {
    const variable_binding& v = variables[whole[k]];
    if (const std::size_t r = first_rank_differing(all, n, k, false))
      throw usage_error(fmt::format("\"{}\" holds {} values on {} but {} on {} of the same tensor group, and its "
                                    "strategy {} says each tensor rank holds it whole: declare a variable that each "
                                    "tensor rank holds a part of with TensorParallel<Axis>",
                                    v.name, all[r * n + k].elements, tensor_rank_named(static_cast<int>(r)),
                                    all[k].elements, tensor_rank_named(0), v.strategy));
    if (!first_rank_differing(all, n, k, true)) continue;
    placement_->tensor->broadcast(v.param, 0);
    moved.push_back(fmt::format("\"{}\"", v.name));
  }
  if (!moved.empty() && placement_->at.dp == 0 && placement_->at.tp == 0)
    fmt::print(stderr,
               "strata: {}: {} started with other values on other ranks of the tensor group; all now start from {}. "
               "If one is a part of a split weight, declare it with TensorParallel<Axis>\n",
               describe_rank(placement_->shape, placement_->world->rank()), fmt::join(moved, ", "), tensor_rank_named(0));
}

template <CommContext Context>
void executor_core<Context>::require_whole_variables_alike(std::string_view when,
                                                           std::span<const variable_binding> variables) {
  if (!placement_ || placement_->shape.tp == 1) return;
  const auto [whole, all] = tensor_group_values(variables, true);
  const std::size_t n = whole.size();
  std::vector<std::string> differing;
  for (std::size_t k = 0; k < n; ++k)
    if (const std::size_t r = first_rank_differing(all, n, k, true))
      differing.push_back(fmt::format("\"{}\" (on {})", variables[whole[k]].name, tensor_rank_named(static_cast<int>(r))));
  const int found = static_cast<int>(differing.size());
  std::vector<int> founds(static_cast<std::size_t>(placement_->world->size()));
  placement_->world->allgather(std::span<const int>(&found, 1), std::span<int>(founds));
  const auto finder = std::find_if(founds.begin(), founds.end(), [](int f) { return f > 0; });
  if (finder == founds.end()) return;
  if (differing.empty())
    throw usage_error(fmt::format("{}: {} found whole variables that differ across its tensor group (its message names "
                                  "them); no checkpoint was saved",
                                  when, describe_rank(placement_->shape, static_cast<int>(finder - founds.begin()))));
  throw usage_error(fmt::format("{}: {} differ{} from {}'s copy, though {} strategy says every rank of the tensor group "
                                "holds it whole; no checkpoint was saved. A weight that each tensor rank holds a part of "
                                "needs TensorParallel<Axis> in its strategy; a whole one must be computed alike on every "
                                "tensor rank (the same batch, the same arithmetic)",
                                when, fmt::join(differing, ", "), differing.size() == 1 ? "s" : "", tensor_rank_named(0),
                                differing.size() == 1 ? "its" : "each one's"));
}

}  // namespace strata

#if defined(STRATA_HEADER_ONLY)
#include "strata/exec/impl/executor_core.ipp"
#endif
