#pragma once
// The executor drives one model: it owns a synchronizer per strategy, the communication
// thread they share, and the per-step bookkeeping (which gradients are ready, accumulation,
// statistics). The training loop stays the user's:
//
//   for (...) {
//     forward_backward(batch, [&](variable_id v) { exec.grad_ready(v); });  // optional overlap
//     exec.step();
//   }
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <iterator>
#include <future>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "strata/ckpt/exchange.hpp"
#include "strata/ckpt/store.hpp"
#include "strata/comm/communicator.hpp"
#include "strata/debug.hpp"
#include "strata/error.hpp"
#include "strata/exec/signature.hpp"
#include "strata/exec/step_bookkeeping.hpp"
#include "strata/exec/synchronizer_table.hpp"
#include "strata/exec/timeout.hpp"
#include "strata/exec/wait_chain.hpp"
#include "strata/model/model.hpp"
#include "strata/optim/optimizer.hpp"
#include "strata/parallel/mesh.hpp"
#include "strata/sync/stats.hpp"
#include "strata/trace/timeline.hpp"

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
inline executor_options check_options(executor_options o) {
  auto require = [](bool holds, std::string_view option, auto value, std::string_view range) {
    if (!holds) throw usage_error(fmt::format("executor_options::{} is {}; it must be {}", option, value, range));
  };
  require(o.accumulation_steps >= 1, "accumulation_steps", o.accumulation_steps, "at least 1");
  require(o.allreduce.ring_chunk_bytes >= 4, "allreduce.ring_chunk_bytes", o.allreduce.ring_chunk_bytes, "at least 4");
  require(o.allreduce.ring_window >= 1, "allreduce.ring_window", o.allreduce.ring_window, "at least 1");
  require(o.allreduce.shared_memory_chunk_bytes >= 4, "allreduce.shared_memory_chunk_bytes",
          o.allreduce.shared_memory_chunk_bytes, "at least 4");
  require(o.allreduce.cross_node_chunk_bytes >= 4, "allreduce.cross_node_chunk_bytes", o.allreduce.cross_node_chunk_bytes,
          "at least 4");
  require(o.allreduce.cross_node_window >= 1, "allreduce.cross_node_window", o.allreduce.cross_node_window, "at least 1");
  require(o.allreduce.ranks_per_node >= 0, "allreduce.ranks_per_node", o.allreduce.ranks_per_node, "0 (the machines) or more");
  require(o.compression.powersgd_warmup_steps >= 0, "compression.powersgd_warmup_steps", o.compression.powersgd_warmup_steps,
          "0 or more");
  checked_timeout(o.timeout.count(), "executor_options::timeout");
  if (o.detail_checks) o.compression.scan_uncompressed = true;
  return o;
}

/// The settings that change what crosses the wire or what the replicas compute, as signature
/// lines: ranks that differ in any of them must not start (different bucket sizes pair
/// unrelated buffers, different optimizers let replicas drift apart in silence). The
/// timeout is a rank's own affair and is not compared.
template <class O>
std::vector<std::string> settings_signature(const executor_options& o, const O& optimizer, bool parameter_server) {
  std::vector<std::string> lines = bucket_settings(o.buckets);
  lines.insert(lines.end(), {
      setting_line("allreduce.ring_chunk_bytes", std::to_string(o.allreduce.ring_chunk_bytes)),
      setting_line("allreduce.ring_window", std::to_string(o.allreduce.ring_window)),
      setting_line("allreduce.shared_memory_max_bytes", std::to_string(o.allreduce.shared_memory_max_bytes)),
      setting_line("allreduce.shared_memory_chunk_bytes", std::to_string(o.allreduce.shared_memory_chunk_bytes)),
      setting_line("allreduce.ranks_per_node", std::to_string(o.allreduce.ranks_per_node)),
      setting_line("allreduce.cross_node_chunk_bytes", std::to_string(o.allreduce.cross_node_chunk_bytes)),
      setting_line("allreduce.cross_node_window", std::to_string(o.allreduce.cross_node_window)),
      setting_line("allreduce.hierarchical_piece_bytes", std::to_string(o.allreduce.hierarchical_piece_bytes)),
      setting_line("compression.powersgd_warmup_steps", std::to_string(o.compression.powersgd_warmup_steps)),
      setting_line("compression.seed", std::to_string(o.compression.seed)),
      setting_line("compression.on_nonfinite",
                   o.compression.on_nonfinite == sync::nonfinite_policy::raise ? "raise" : "skip_step"),
      setting_line("compression.scan_uncompressed", o.compression.scan_uncompressed ? "true" : "false")});
  if (parameter_server)
    lines.push_back(setting_line("ps_servers", o.ps_servers == server_assignment::first_server ? "rank 0" : "balanced"));
  const std::vector<std::string> hyper_parameters = hyper_parameter_settings(optimizer);
  lines.insert(lines.end(), hyper_parameters.begin(), hyper_parameters.end());
  return lines;
}

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

/// Statistics of one step plus whether it updated the parameters.
struct step_stats : sync_stats {
  bool updated = false;
  bool skipped = false;  ///< a non-finite gradient was found and on_nonfinite is skip_step
  double seconds = 0.0;  ///< wall time of step() itself
};

template <CommContext Context, class M, Optimizer O>
class executor;

template <CommContext Context, ValidStrategy... Strategies, Optimizer O>
class executor<Context, model<Strategies...>, O> {
  using comm_type = std::remove_reference_t<decltype(std::declval<Context&>().collectives())>;
  using control_type = std::remove_reference_t<decltype(std::declval<Context&>().control())>;
  using watch_type = wait_watch<std::remove_reference_t<decltype(job_control(std::declval<Context&>()))>>;
  static_assert(std::is_same_v<comm_type, std::remove_reference_t<decltype(std::declval<Context&>().parameter_server())>>,
                "a backend's collectives and parameter-server communicators must be of one type");
  static constexpr bool has_parameter_server = ((Strategies::descriptor.placement == placement_kind::ps) || ...);
  using ps_service = sync::ps::service<comm_type, O>;
  static_assert((detail::TableEntryIsSynchronizer<Strategies, comm_type, O> && ...),
                "every synchronizer the table picks must model sync::Synchronizer");
  /// Whether every rank must take part in each update (all-reduce, or a BSP parameter
  /// server). Only then do ranks announce their arrival at each update, which is what names
  /// a missing rank on a timeout: under ASP and SSP ranks run apart on purpose, and
  /// exchanging announcements would hold them in step.
  static constexpr bool step_is_collective =
      ((Strategies::descriptor.placement == placement_kind::replicate ||
        Strategies::descriptor.consistency == consistency_kind::bsp) || ...);

 public:
  using model_type = model<Strategies...>;

  /// Collective: every rank constructs its executor together. Verifies first that all ranks
  /// declared the same model (signature_error otherwise), then makes every replica start
  /// from rank 0's parameters; both within the deadline.
  executor(Context& context, model_type& m, O optimizer, executor_options options = {},
           std::optional<mesh_placement<control_type>> placement = std::nullopt)
      : context_(&context), model_(&m), optimizer_(std::move(optimizer)), options_(detail::check_options(options)),
        placement_(placement),
        steps_(names_of(m.variables()), options_.accumulation_steps), thread_(std::make_unique<sync::comm_thread>()) {
    hyper_parameters_.check(optimizer_, 0);
    within_deadline("start-up (the model-signature check and the parameter broadcast)", [&] {
      // The handshake runs before any synchronizer talks to other ranks.
      std::vector<std::string> signature =
          model_signature(m.variables(), context.control().size(), options_.accumulation_steps);
      // Settings first: the variables' lines stay last, where "fewer variables" is found.
      const std::vector<std::string> settings = detail::settings_signature(options_, optimizer_, has_parameter_server);
      signature.insert(signature.begin() + 2, settings.begin(), settings.end());
      verify_signature(context.control(), signature);
      start_whole_variables_alike();  // before the data group's broadcast spreads them
      sync::synchronizer_resources<comm_type, O> resources{
          m.variables(), context.collectives(), *thread_, optimizer_,
          {options_.buckets, options_.allreduce, options_.compression}, options_.timeout};
      if constexpr (has_parameter_server) {
        ps_ = std::make_unique<ps_service>(context.parameter_server(), m.variables(), options_.ps_servers);
        resources.parameter_server = ps_.get();
      }
      synchronizers_.emplace(make_synchronizer<Strategies>(resources, m)...);
      if constexpr (has_parameter_server) ps_->start(optimizer_);  // after the broadcast: every rank's values are rank 0's
    });
    for (std::size_t i = 0; i < m.variables().size(); ++i) local_.push_back(count_before(i));
    // On a mesh, pipeline stages and tensor partners may wait for this rank while its step
    // waits for another: it says whom it waits for (wait_chain.hpp).
    if constexpr (requires { context.job_control(); }) watch_ = std::make_unique<watch_type>(job_control(context));
  }

  ~executor() {
    thread_.reset();  // drain communication before the buffers it uses go away
    if constexpr (has_parameter_server) ps_.reset();  // tell every server this worker is done; wait for ours
  }
  executor(const executor&) = delete;
  executor& operator=(const executor&) = delete;

  /// Marks variable `v`'s gradient final for this micro-batch, so its bucket can start
  /// communicating while backward goes on. Optional: step() handles unmarked variables, but
  /// once one variable of a step is marked, all must be.
  void grad_ready(variable_id v) {
    steps_.mark_ready(v.index);
    visit(model_->strategy_of(v), [&](auto& s) { s.gradient_ready(local_[v.index], steps_.phase(updates_)); });
  }
  void grad_ready(std::string_view name) { grad_ready(model_->id(name)); }

  /// Ends a micro-batch: on the last of `accumulation_steps` it reduces, averages and
  /// updates the parameters (returns updated = true); otherwise it only accumulates.
  step_stats step() {
    const auto start = std::chrono::steady_clock::now();
    if (options_.detail_checks) require_buffers_in_place();
    steps_.require_all_ready();
    const micro_step m = steps_.phase(updates_);
    const trace::span traced("step", "step", 0, [&] {
      return m.last ? fmt::format("update {}", updates_ + 1) : fmt::format("update {}, accumulating", updates_ + 1);
    });
    if (m.last && step_is_collective) announce();
    std::apply([&](auto&... s) { (s.flush(m), ...); }, *synchronizers_);
    step_stats stats;
    std::optional<std::string> nonfinite;
    const auto deadline = deadline_from_now();
    try {
      const auto watching = watch_waits();
      std::size_t k = 0;
      std::apply(
          [&](auto&... s) {
            ((static_cast<sync_stats&>(stats) += traced_wait(k++, [&] { return s.wait(m, nonfinite, deadline); })), ...);
          },
          *synchronizers_);
    } catch (const sync::stalled& stall) {
      give_up(fmt::format("update {}, in {}", updates_ + 1, stall.what()), stall.waited_for);
    }
    if (m.last && step_is_collective) collect_announcements();
    steps_.end_micro_batch();
    total_ += stats;
    if (m.last && nonfinite) {
      // Every rank saw the same non-finite sum, so every rank decides the same way.
      if (options_.compression.on_nonfinite == sync::nonfinite_policy::raise)
        throw numeric_error(fmt::format("the averaged gradient of \"{}\" is NaN or infinite (some rank produced "
                                        "non-finite values); parameters were not updated. The likely causes, most likely "
                                        "first: a learning rate too high (lower it), a loss that overflows (check it), a "
                                        "gradient or parameter buffer reallocated after it was bound (a std::vector that "
                                        "grew: the executor reads the old memory; bind after the last resize). To skip "
                                        "such steps instead, set compression.on_nonfinite = skip_step",
                                        *nonfinite));
      stats.skipped = true;
    } else if (m.last) {
      hyper_parameters_.check(optimizer_, updates_ + 1);  // a schedule may have changed them
      ++updates_;
      const trace::span update("update", "optimizer");
      std::apply([&](auto&... s) { (s.update(optimizer_, updates_), ...); }, *synchronizers_);
      stats.updated = true;
    }
    stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return stats;
  }

  /// SparseRows variables: fetches `rows` of variable `v` into its bound table before the
  /// (micro-)batch that needs them, as fresh as its consistency requires (on the parameter
  /// server, blocks under BSP/SSP until the servers may answer; a replicated table is always
  /// current, so only the rows are checked). Rows may repeat.
  void pull(variable_id v, std::span<const std::uint32_t> rows) {
    if (steps_.marking())
      throw usage_error(fmt::format("pull(\"{}\") after grad_ready in the same micro-batch; pull the rows a micro-batch "
                                    "reads before its backward",
                                    (*model_)[v].name));
    const auto deadline = deadline_from_now();
    visit_sparse(v, "pull", [&](auto& s, std::size_t local) {
      try {
        s.pull(local, rows, updates_ + 1, deadline);
      } catch (const sync::stalled& stall) {
        give_up(fmt::format("update {}, in the pull of rows of \"{}\": {}", updates_ + 1, (*model_)[v].name, stall.what()),
                stall.waited_for);
      }
    });
  }

  /// SparseRows variables: this micro-batch's gradient of variable `v` as rows (they may
  /// repeat: their values add) and their values, row after row. A variable given no rows
  /// pushes none (its servers still hear that this worker's update is done).
  void sparse_gradient(variable_id v, std::span<const std::uint32_t> rows, std::span<const float> values) {
    visit_sparse(v, "sparse_gradient", [&](auto& s, std::size_t local) { s.sparse_gradient(local, rows, values); });
  }

  /// Records what every parameter-server read reflected (tests of the consistency models).
  void record_parameter_server_reads(bool on) {
    if constexpr (has_parameter_server) ps_->worker().record_reads(on);
  }
  std::vector<sync::ps::read_record> parameter_server_reads() {
    if constexpr (has_parameter_server) return ps_->worker().take_reads();
    else return {};
  }
  /// How the parameter server placed its shards (empty without PS variables).
  const sync::ps::plan* parameter_server_plan() const {
    if constexpr (has_parameter_server) return &ps_->layout();
    else return nullptr;
  }

  /// Everything a checkpoint keeps of this executor's variables (parameters, optimizer
  /// state, error-feedback residuals, codec state), as tensors that restore fills in place.
  /// Parameter-server variables contribute the shards this rank hosts, read from the servers
  /// once every rank's pushes so far are applied: call it on every rank (saves do).
  ckpt::state_set state() {
    ckpt::state_set set;
    try {
      std::apply([&](auto&... s) { (s.collect_state(set), ...); }, *synchronizers_);
    } catch (const sync::stalled& stall) {
      give_up(fmt::format("collecting the state of update {}: {}", updates_, stall.what()), stall.waited_for);
    }
    if (placement_) place_on_mesh(set);
    return set;
  }

  /// Collective: saves a checkpoint of the state after `updates()` updates, with the user's
  /// `meta` (data position, random state) and `extra` tensors of their own beside it (host
  /// memory; state the executor does not hold, e.g. batch normalization's running
  /// statistics). Call it between updates.
  void save_checkpoint(const ckpt::store& store, const ckpt::metadata& meta = {},
                       std::span<const ckpt::tensor_state> extra = {}) {
    steps_.require_between_updates("save_checkpoint");
    ckpt::state_set tensors = state();
    tensors.add_all(extra);
    const trace::span traced("checkpoint", "checkpoint", 0, [&] { return store.folder_of(updates_).string(); });
    within_deadline(fmt::format("saving checkpoint {}", store.folder_of(updates_).string()), [&] {
      require_whole_variables_alike(fmt::format("before checkpoint {}", updates_));
      store.save(checkpoint_control(), updates_, tensors, meta, description());
    });
  }

  /// What a checkpoint says of this rank's variables (strata-ckpt info shows it): their
  /// canonical strategies and element type, and the mesh.
  ckpt::model_description description() const {
    static const std::array<std::string, sizeof...(Strategies)> strategies = {strategy_name<Strategies>()...};
    ckpt::model_description d;
    if (placement_) d.mesh = to_string(placement_->shape);
    for (std::size_t i = 0; i < model_->variables().size(); ++i)
      d.variables.push_back({model_->variables()[i].name, strategies[model_->strategy_of({i})], "float32"});
    return d;
  }

  /// Collective: restores the newest usable checkpoint in `store` (refusing corrupted ones)
  /// and continues counting updates from it; returns what was restored, with the user's
  /// metadata, or nullopt when `store` holds no checkpoint. Any world size or partitioning
  /// may have saved it. `extra` are filled as save_checkpoint's were saved.
  std::optional<ckpt::restored_checkpoint> restore_checkpoint(const ckpt::store& store,
                                                              std::span<const ckpt::tensor_state> extra = {}) {
    steps_.require_between_updates("restore_checkpoint");
    ckpt::state_set tensors = state();
    tensors.add_all(extra);
    std::optional<ckpt::restored_checkpoint> restored;
    within_deadline(fmt::format("restoring a checkpoint from {}", store.directory().string()),
                    [&] { restored = store.restore_latest(checkpoint_control(), tensors); });
    if (restored) {
      updates_ = restored->step;
      if constexpr (has_parameter_server) restore_parameter_servers();
    }
    return restored;
  }

  /// Collective: fills the parameters from safetensors weights (a .safetensors file, or the
  /// .index.json of shards: strata-ckpt export's, or weights published elsewhere), whatever
  /// the strategies and mesh: each rank takes its parts. The optimizer state and the update
  /// count stay as they are. A tensor the model lacks, a weight the file lacks, another shape
  /// or a dtype other than F64/F32/F16/BF16 is refused on every rank (ckpt::checkpoint_error),
  /// naming the tensor.
  void load_weights(const std::filesystem::path& file) {
    steps_.require_between_updates("load_weights");
    const ckpt::state_set tensors = state();
    within_deadline(fmt::format("loading weights from {}", file.string()),
                    [&] { ckpt::load_weights(checkpoint_control(), file, tensors); });
    if constexpr (has_parameter_server) restore_parameter_servers();
  }

  /// What this rank holds: the parameters it binds, the optimizer state of replicated
  /// variables and of the parameter-server shards it hosts, and those shards' values. On a
  /// mesh with a tensor group, also which part of that its tensor group holds alike.
  memory_use memory() {
    memory_use use;
    if constexpr (has_parameter_server) use += ps_->held();
    std::apply([&](auto&... s) { (s.add_memory(use), ...); }, *synchronizers_);
    for (const variable_binding& v : model_->variables()) use.parameters += v.bytes();
    if (placement_ && placement_->shape.tp > 1) {
      ckpt::state_set set;
      std::apply([&](auto&... s) { (s.collect_state(set), ...); }, *synchronizers_);
      for (const ckpt::tensor_state& t : set.tensors())
        if (t.how == ckpt::sharing::replicated && tensor_axis_of(t.name) < 0) use.tensor_group_copies += t.data.size_bytes();
    }
    return use;
  }

  /// The optimizer's hyper-parameters may be changed between steps (learning-rate schedules).
  O& optimizer() { return optimizer_; }
  const sync_stats& total() const { return total_; }
  std::int64_t updates() const { return updates_; }

 private:
  template <class S>
  synchronizer_t<S, comm_type, O> make_synchronizer(const sync::synchronizer_resources<comm_type, O>& resources,
                                                    model_type& m) {
    std::vector<std::size_t> ids;
    for (variable_id id : m.template ids_of<S>()) ids.push_back(id.index);
    return {resources, ids};
  }

  // The servers get the restored shards and every worker's clock; once all have them (a
  // barrier), dense PS variables fetch their values.
  void restore_parameter_servers() {
    within_deadline("handing the restored checkpoint to the parameter servers", [&] {
      const auto deadline = deadline_from_now();
      auto each = [&](auto&& f) { std::apply([&](auto&... s) { (f(s), ...); }, *synchronizers_); };
      each([&](auto& s) {
        if constexpr (requires { s.restore_servers(updates_, deadline); }) s.restore_servers(updates_, deadline);
      });
      context_->control().barrier();
      each([&](auto& s) {
        if constexpr (requires { s.refresh(deadline); }) s.refresh(deadline);
      });
    });
  }

  /// Synchronizer k's wait(), as a timeline span that says what it waits for.
  template <class Wait>
  static sync_stats traced_wait(std::size_t k, Wait&& wait) {
    const trace::span traced("wait", "wait", 0, [&] {
      static const std::array<std::string, sizeof...(Strategies)> strategies = {strategy_name<Strategies>()...};
      return "for the synchronization of " + strategies[k];
    });
    return wait();
  }

  /// What variable i's strategy says of it.
  const strategy_descriptor& descriptor_of(std::size_t i) const {
    static constexpr std::array<strategy_descriptor, sizeof...(Strategies)> descriptors = {Strategies::descriptor...};
    return descriptors[model_->strategy_of({i})];
  }

  /// The ranks that save and restore checkpoints together: the world, on a mesh.
  control_type& checkpoint_control() { return placement_ ? *placement_->world : context_->control(); }

  /// The tensor-parallel axis of the variable a state tensor belongs to (its name is the
  /// variable's, or the variable's followed by "/"), or -1.
  int tensor_axis_of(std::string_view tensor) const {
    std::size_t best = 0;
    int axis = -1;
    for (std::size_t i = 0; i < model_->variables().size(); ++i) {
      const std::string& name = model_->variables()[i].name;
      const bool owns = tensor == name || (tensor.starts_with(name) && tensor.size() > name.size() && tensor[name.size()] == '/');
      if (owns && name.size() >= best) best = name.size(), axis = descriptor_of(i).tensor_axis;
    }
    return axis;
  }

  /// Says where each state tensor lies in the whole model: a tensor-parallel part as the
  /// rows of the whole tensor it covers (one range per index before its axis), held alike by
  /// the data group; a whole tensor as held alike by every rank of the stage (its data and
  /// tensor groups), so that each of them writes a part.
  void place_on_mesh(ckpt::state_set& set) const {
    const mesh_shape& shape = placement_->shape;
    const mesh_coordinates& at = placement_->at;
    set.replace_tensors([&](const ckpt::tensor_state& t) {
      std::vector<ckpt::tensor_state> placed;
      const int axis = tensor_axis_of(t.name);
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

  /// What a tensor group compares of each whole variable: its size and a fingerprint.
  struct whole_values {
    std::uint64_t elements;
    std::uint32_t fingerprint, unused = 0;
  };

  /// The variables each rank of the tensor group holds whole (no TensorParallel<Axis>), the
  /// replicated ones only or those of any placement; and what the group's ranks hold of
  /// them, rank after rank. Empty without a tensor group.
  std::pair<std::vector<std::size_t>, std::vector<whole_values>> tensor_group_values(bool replicated_only) {
    if (!placement_ || placement_->shape.tp == 1) return {};
    std::vector<std::size_t> whole;
    std::vector<whole_values> mine;
    for (std::size_t i = 0; i < model_->variables().size(); ++i) {
      const strategy_descriptor& d = descriptor_of(i);
      if (d.tensor_parallel() || (replicated_only && d.placement != placement_kind::replicate)) continue;
      whole.push_back(i);
      const std::span<const float> param = model_->variables()[i].param;
      mine.push_back({param.size(), fingerprint_of(param)});
    }
    std::vector<whole_values> all(mine.size() * static_cast<std::size_t>(placement_->shape.tp));
    placement_->tensor->allgather(std::span<const whole_values>(mine), std::span<whole_values>(all));
    return {std::move(whole), std::move(all)};
  }

  /// The first rank of the tensor group whose `field` of whole variable k (of n per rank)
  /// differs from rank 0's, or 0 where none does.
  template <class Field>
  static std::size_t first_rank_differing(const std::vector<whole_values>& all, std::size_t n, std::size_t k,
                                          Field whole_values::*field) {
    for (std::size_t r = 1; r * n < all.size(); ++r)
      if (all[r * n + k].*field != all[k].*field) return r;
    return 0;
  }

  /// How messages name rank `r` of this rank's tensor group.
  std::string tensor_rank_named(int r) const {
    mesh_coordinates c = placement_->at;
    c.tp = r;
    return describe_rank(placement_->shape, placement_->shape.rank(c));
  }

  /// Start-up, before the data group's broadcast: whole variables take the tensor group's
  /// rank 0's values, so that every rank of a stage starts from the same whole tensors
  /// whatever each initialized. Only those that differ move, and the stage's first rank
  /// names them: a part of a split weight declared without TensorParallel<Axis> looks the
  /// same here (require_whole_variables_alike refuses it before a checkpoint).
  void start_whole_variables_alike() {
    const auto [whole, all] = tensor_group_values(false);
    const std::size_t n = whole.size();
    std::vector<std::string> moved;
    for (std::size_t k = 0; k < n; ++k) {
      const variable_binding& v = model_->variables()[whole[k]];
      if (const std::size_t r = first_rank_differing(all, n, k, &whole_values::elements))
        throw usage_error(fmt::format("\"{}\" holds {} values on {} but {} on {} of the same tensor group, and its "
                                      "strategy {} says each tensor rank holds it whole: declare a variable that each "
                                      "tensor rank holds a part of with TensorParallel<Axis>",
                                      v.name, all[r * n + k].elements, tensor_rank_named(static_cast<int>(r)),
                                      all[k].elements, tensor_rank_named(0), v.strategy));
      if (!first_rank_differing(all, n, k, &whole_values::fingerprint)) continue;
      placement_->tensor->broadcast(v.param, 0);
      moved.push_back(fmt::format("\"{}\"", v.name));
    }
    if (!moved.empty() && placement_->at.dp == 0 && placement_->at.tp == 0)
      fmt::print(stderr,
                 "strata: {}: {} started with other values on other ranks of the tensor group; all now start from {}. "
                 "If one is a part of a split weight, declare it with TensorParallel<Axis>\n",
                 describe_rank(placement_->shape, placement_->world->rank()), fmt::join(moved, ", "), tensor_rank_named(0));
  }

  /// Before a checkpoint: the tensor group's copies of each whole replicated variable must be
  /// equal, or one rank's values would be saved as everyone's. A weight that each tensor rank
  /// holds a part of, declared without TensorParallel<Axis>, differs here after its first
  /// update. Every rank of the world throws usage_error, so none waits in the checkpoint for
  /// ranks that left it.
  void require_whole_variables_alike(std::string_view when) {
    if (!placement_ || placement_->shape.tp == 1) return;
    const auto [whole, all] = tensor_group_values(true);
    const std::size_t n = whole.size();
    std::vector<std::string> differing;
    for (std::size_t k = 0; k < n; ++k)
      if (const std::size_t r = first_rank_differing(all, n, k, &whole_values::fingerprint))
        differing.push_back(fmt::format("\"{}\" (on {})", model_->variables()[whole[k]].name,
                                        tensor_rank_named(static_cast<int>(r))));
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

  /// Detail checks: a buffer bound from a std::vector that has since reallocated would be
  /// read after it was freed (and its garbage blamed on the learning rate).
  void require_buffers_in_place() const {
    for (const variable_binding& v : model_->variables())
      if (const std::string_view moved = v.moved_buffer(); !moved.empty())
        throw binding_error(fmt::format("variable \"{}\": the std::vector its {} buffer was bound from has reallocated or "
                                        "changed size since (detail checks); the executor would read freed memory. Bind "
                                        "it after its last resize, and keep its size",
                                        v.name, moved));
  }

  /// When a wait that starts now gives up.
  std::chrono::steady_clock::time_point deadline_from_now() const {
    return std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(options_.timeout);
  }

  std::size_t count_before(std::size_t i) const {
    std::size_t n = 0;
    for (std::size_t j = 0; j < i; ++j) n += model_->strategy_of({j}) == model_->strategy_of({i});
    return n;
  }

  // Arrival announcements: when a rank reaches step() (its backward pass done) it tells every
  // other rank, on the control communicator. If a collective then stalls, the announcements
  // that never came name the ranks that are missing: a rank stopped in the middle of its
  // backward pass has not announced, though it may have started some buckets' all-reduces.
  static constexpr int announce_tag = 0x4842;

  void announce() {
    if (announced_) return;
    announced_ = true;
    announced_update_ = static_cast<double>(updates_ + 1);
    auto& control = context_->control();
    for (int r = 0; r < control.size(); ++r)
      if (r != control.rank()) announcements_.push_back(control.isend(std::span<const double>(&announced_update_, 1), r, announce_tag));
  }

  void collect_announcements() {
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

  /// Runs the collective work `f` on the communication thread and waits for it until the
  /// deadline; if it does not finish, gives up naming the ranks that never arrived. Rank
  /// arrival is announced as for an update.
  template <class F>
  void within_deadline(std::string_view doing, F&& f) {
    announce();
    std::future<void> done = thread_->submit(std::forward<F>(f));
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

  /// While a step waits: once half its deadline is gone, tells the job's ranks which rank of
  /// the group it waits for (the first that has not announced the update), if any.
  typename watch_type::scope watch_waits() {
    return {watch_.get(), options_.timeout, [this] {
              auto& control = context_->control();
              for (int r = 0; r < control.size(); ++r)
                if (announced_ && r != control.rank() && !control.iprobe(r, announce_tag)) return job_rank(*context_, r);
              return -1;
            }};
  }

  /// A collective stalled: name the ranks that never announced this update (or, where ranks
  /// announce nothing, as under ASP and SSP, the ranks the wait was for), tell the user, and
  /// abort the job so that no rank hangs (with MPI, mpirun exits non-zero).
  [[noreturn]] void give_up(std::string_view stalled, std::span<const int> waited_for = {}) {
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

  /// "rank 2", "ranks 1, 3"; in a mesh's group, each rank's world rank and coordinates.
  std::string ranks_named(std::span<const int> ranks) const {
    if constexpr (requires(const Context& c) { c.describe(0); }) {
      std::vector<std::string> names;
      for (int r : ranks) names.push_back(context_->describe(r));
      return fmt::format("{}", fmt::join(names, ", "));
    } else {
      return fmt::format("rank{} {}", ranks.size() > 1 ? "s" : "", fmt::join(ranks, ", "));
    }
  }

  template <class F>
  void visit_sparse(variable_id v, std::string_view call, F&& f) {
    bool done = false;
    visit(model_->strategy_of(v), [&](auto& s) {
      if constexpr (requires { s.sparse_gradient(std::size_t{}, std::span<const std::uint32_t>(), std::span<const float>()); }) {
        f(s, local_[v.index]);
        done = true;
      }
    });
    if (!done)
      throw usage_error(fmt::format("{}(\"{}\"): the variable's strategy {} has no SparseRows; pull and "
                                    "sparse_gradient are for sparse tables",
                                    call, (*model_)[v].name, (*model_)[v].strategy));
  }

  template <class F>
  void visit(std::size_t strategy, F&& f) {
    std::size_t k = 0;
    std::apply([&](auto&... s) { ((k++ == strategy ? f(s) : void()), ...); }, *synchronizers_);
  }

  Context* context_;
  model_type* model_;
  O optimizer_;
  hyper_parameter_check<O> hyper_parameters_;
  executor_options options_;
  std::optional<mesh_placement<control_type>> placement_;
  step_bookkeeping steps_;  // ready marks and micro-batches
  std::unique_ptr<sync::comm_thread> thread_;
  std::conditional_t<has_parameter_server, std::unique_ptr<ps_service>, std::nullptr_t> ps_{};
  std::optional<std::tuple<synchronizer_t<Strategies, comm_type, O>...>> synchronizers_;  // made at start-up
  std::vector<std::size_t> local_;  // index of each variable within its synchronizer
  std::unique_ptr<watch_type> watch_;  // on a mesh's group only
  bool announced_ = false;
  double announced_update_ = 0.0;
  std::vector<typename std::remove_reference_t<decltype(std::declval<Context&>().control())>::request> announcements_;
  std::int64_t updates_ = 0;
  sync_stats total_;
};

namespace detail {
template <class M, class C, class O>
inline constexpr bool table_covers = false;
template <class... Strategies, class C, class O>
inline constexpr bool table_covers<model<Strategies...>, C, O> = (HasSynchronizer<Strategies, C, O> && ...);

/// The first variable's synchronizer that the table lacks: an incomplete type whose name,
/// printed in a `sizeof` error, is the strategy and the backend.
template <class C, class O, class S, class... Rest>
auto first_missing(model<S, Rest...>*) {
  if constexpr (!HasSynchronizer<S, C, O> || sizeof...(Rest) == 0)
    return static_cast<synchronizer_t<S, C, O>*>(nullptr);
  else
    return first_missing<C, O>(static_cast<model<Rest...>*>(nullptr));
}

template <class Context>
using collectives_of = std::remove_reference_t<decltype(std::declval<Context&>().collectives())>;
}  // namespace detail

// make_executor checks the synchronizer table itself, before the executor class is formed:
// the error then stands one call from the user's line, and a strategy without a synchronizer
// is one error, not a cascade through the executor's members.
#define STRATA_CHECK_SYNCHRONIZERS(Comm)                                                                              \
  static_assert(detail::table_covers<M, Comm, O>,                                                                   \
                "strata has no synchronizer for this strategy on this backend yet; the incomplete type "            \
                "diagnostic::no_synchronizer_for_strategy_on_backend<Strategy, Backend> in the next error names "  \
                "both. The supported combinations are listed in docs/compatibility.md");

/// Builds the executor for `m` on `context`'s backend: the host executor, whose variables
/// are host memory. (Device variables: make_executor in exec/nccl_executor.cuh.)
template <CommContext Context, Model M, Optimizer O>
auto make_executor(Context& context, M& m, O optimizer, executor_options options = {}) {
  STRATA_CHECK_SYNCHRONIZERS(detail::collectives_of<Context>)
  if constexpr (detail::table_covers<M, detail::collectives_of<Context>, O>)
    return executor<Context, M, O>(context, m, std::move(optimizer), options);
  else
    (void)sizeof(*detail::first_missing<detail::collectives_of<Context>, O>(static_cast<M*>(nullptr)));
}

/// Builds the executor for this rank's part `m` of a model on `grid`: it averages over the
/// data group, and checkpoints, collective over the whole world, hold the whole model (see
/// mesh_placement). Tensor-parallel variables bind this rank's part.
template <CommContext Context, Model M, Optimizer O>
auto make_executor(mesh<Context>& grid, M& m, O optimizer, executor_options options = {}) {
  using comm = detail::collectives_of<group_context<Context>>;
  STRATA_CHECK_SYNCHRONIZERS(comm)
  if constexpr (detail::table_covers<M, comm, O>) {
    using control = std::remove_reference_t<decltype(grid.world().control())>;
    return executor<group_context<Context>, M, O>(grid.data(), m, std::move(optimizer), options,
                                                  mesh_placement<control>{&grid.world().control(),
                                                                          &grid.tensor().control(), grid.shape(),
                                                                          grid.coordinates()});
  } else {
    (void)sizeof(*detail::first_missing<comm, O>(static_cast<M*>(nullptr)));
  }
}
#undef STRATA_CHECK_SYNCHRONIZERS

}  // namespace strata
