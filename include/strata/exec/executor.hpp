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
#include <functional>
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
#include "strata/exec/executor_core.hpp"
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

namespace detail {

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
  using control_type = typename executor_core<Context>::control_type;
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
      : model_(&m), optimizer_(std::move(optimizer)),
        core_(context, options, std::move(placement), descriptors_by_variable(m)),
        steps_(names_of(m.variables()), core_.options().accumulation_steps) {
    hyper_parameters_.check(optimizer_, 0);
    within_deadline("start-up (the model-signature check and the parameter broadcast)", [&] {
      // The handshake runs before any synchronizer talks to other ranks.
      std::vector<std::string> signature =
          model_signature(m.variables(), context.control().size(), core_.options().accumulation_steps);
      // Settings first: the variables' lines stay last, where "fewer variables" is found.
      const std::vector<std::string> settings = detail::settings_signature(core_.options(), optimizer_, has_parameter_server);
      signature.insert(signature.begin() + 2, settings.begin(), settings.end());
      verify_signature(context.control(), signature);
      core_.start_whole_variables_alike(m.variables());  // before the data group's broadcast spreads them
      sync::synchronizer_resources<comm_type, O> resources{
          m.variables(), context.collectives(), core_.thread(), optimizer_,
          {core_.options().buckets, core_.options().allreduce, core_.options().compression}, core_.options().timeout};
      if constexpr (has_parameter_server) {
        ps_ = std::make_unique<ps_service>(context.parameter_server(), m.variables(), core_.options().ps_servers);
        resources.parameter_server = ps_.get();
      }
      synchronizers_.emplace(make_synchronizer<Strategies>(resources, m)...);
      if constexpr (has_parameter_server) ps_->start(optimizer_);  // after the broadcast: every rank's values are rank 0's
    });
    for (std::size_t i = 0; i < m.variables().size(); ++i) local_.push_back(count_before(i));
  }

  ~executor() {
    core_.stop_thread();  // drain communication before the buffers it uses go away
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
    if (core_.options().detail_checks) detail::require_buffers_in_place(model_->variables());
    steps_.require_all_ready();
    const micro_step m = steps_.phase(updates_);
    const trace::span traced("step", "step", 0, [&] {
      return m.last ? fmt::format("update {}", updates_ + 1) : fmt::format("update {}, accumulating", updates_ + 1);
    });
    if (m.last && step_is_collective) core_.announce(updates_ + 1);
    std::apply([&](auto&... s) { (s.flush(m), ...); }, *synchronizers_);
    step_stats stats;
    std::optional<std::string> nonfinite;
    const auto deadline = core_.deadline_from_now();
    try {
      const auto watching = core_.watch_waits();
      std::size_t k = 0;
      std::apply(
          [&](auto&... s) {
            ((static_cast<sync_stats&>(stats) += traced_wait(k++, [&] { return s.wait(m, nonfinite, deadline); })), ...);
          },
          *synchronizers_);
    } catch (const sync::stalled& stall) {
      core_.give_up(fmt::format("update {}, in {}", updates_ + 1, stall.what()), stall.waited_for);
    }
    if (m.last && step_is_collective) core_.collect_announcements();
    steps_.end_micro_batch();
    total_ += stats;
    if (m.last && nonfinite) {
      // Every rank saw the same non-finite sum, so every rank decides the same way.
      if (core_.options().compression.on_nonfinite == sync::nonfinite_policy::raise)
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
    const auto deadline = core_.deadline_from_now();
    visit_sparse(v, "pull", [&](auto& s, std::size_t local) {
      try {
        s.pull(local, rows, updates_ + 1, deadline);
      } catch (const sync::stalled& stall) {
        core_.give_up(fmt::format("update {}, in the pull of rows of \"{}\": {}", updates_ + 1, (*model_)[v].name, stall.what()),
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
      core_.give_up(fmt::format("collecting the state of update {}: {}", updates_, stall.what()), stall.waited_for);
    }
    if (core_.placement()) core_.place_on_mesh(set, model_->variables());
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
      core_.require_whole_variables_alike(fmt::format("before checkpoint {}", updates_), model_->variables());
      store.save(core_.checkpoint_control(), updates_, tensors, meta, description());
    });
  }

  /// What a checkpoint says of this rank's variables (strata-ckpt info shows it): their
  /// canonical strategies and element type, and the mesh.
  ckpt::model_description description() const {
    static const std::array<std::string, sizeof...(Strategies)> strategies = {strategy_name<Strategies>()...};
    ckpt::model_description d;
    if (core_.placement()) d.mesh = to_string(core_.placement()->shape);
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
                    [&] { restored = store.restore_latest(core_.checkpoint_control(), tensors); });
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
                    [&] { ckpt::load_weights(core_.checkpoint_control(), file, tensors); });
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
    if (core_.placement() && core_.placement()->shape.tp > 1) {
      ckpt::state_set set;
      std::apply([&](auto&... s) { (s.collect_state(set), ...); }, *synchronizers_);
      use.tensor_group_copies += core_.tensor_group_copies(set, model_->variables());
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
      const auto deadline = core_.deadline_from_now();
      auto each = [&](auto&& f) { std::apply([&](auto&... s) { (f(s), ...); }, *synchronizers_); };
      each([&](auto& s) {
        if constexpr (requires { s.restore_servers(updates_, deadline); }) s.restore_servers(updates_, deadline);
      });
      core_.context().control().barrier();
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

  /// What each variable's strategy says of it, variable by variable.
  static std::vector<strategy_descriptor> descriptors_by_variable(const model_type& m) {
    static constexpr std::array<strategy_descriptor, sizeof...(Strategies)> descriptors = {Strategies::descriptor...};
    std::vector<strategy_descriptor> by_variable;
    for (std::size_t i = 0; i < m.variables().size(); ++i) by_variable.push_back(descriptors[m.strategy_of({i})]);
    return by_variable;
  }

  /// Collective work `f` on the communication thread, announced as the next update, within
  /// the deadline (executor_core::within_deadline).
  void within_deadline(std::string_view doing, std::function<void()> f) {
    core_.within_deadline(doing, updates_ + 1, std::move(f));
  }

  std::size_t count_before(std::size_t i) const {
    std::size_t n = 0;
    for (std::size_t j = 0; j < i; ++j) n += model_->strategy_of({j}) == model_->strategy_of({i});
    return n;
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

  model_type* model_;
  O optimizer_;
  hyper_parameter_check<O> hyper_parameters_;
  executor_core<Context> core_;  // deadlines, announcements, the communication thread, the mesh's checks
  step_bookkeeping steps_;  // ready marks and micro-batches
  std::conditional_t<has_parameter_server, std::unique_ptr<ps_service>, std::nullptr_t> ps_{};
  std::optional<std::tuple<synchronizer_t<Strategies, comm_type, O>...>> synchronizers_;  // made at start-up
  std::vector<std::size_t> local_;  // index of each variable within its synchronizer
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
