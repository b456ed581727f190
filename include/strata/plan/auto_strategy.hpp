#pragma once
// Automatic strategies: for every variable, the candidate strategies its gradient form
// allows, and a plan that the cost model predicts fastest. The search starts from the best
// plan that gives every variable of a gradient form one strategy (what a builder does), then
// moves one variable at a time to another candidate while the predicted step gets faster
// (by at least auto_options::min_gain), so that a plan can mix: the large tensors on one algorithm, the small ones fused on
// another, a sparse table on parameter-server shards. The result says, per variable, what
// was chosen and what it beat by how much, and lists the uniform plans as runner-ups.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "strata/plan/cost_model.hpp"
#include "strata/strategy/canonical_string.hpp"

namespace strata::plan {

struct auto_options {
  /// The codecs offered with every all-reduce algorithm (16-bit gradients on the wire: lossy,
  /// though training usually does not notice); empty: none. TopK and PowerSGD change what is
  /// learned and are never chosen automatically.
  std::vector<std::string> compression = {"FP16", "BF16"};
  /// Offer the parameter server for dense variables.
  bool allow_parameter_server = true;
  /// Moves of one variable at a time after the best uniform plan; 0 keeps that uniform plan
  /// (for a program that gives all its variables one strategy).
  int improvement_passes = 4;
  /// A move is taken only if it shortens the predicted step by this fraction: a smaller gain
  /// is below what a calibration resolves (rates move by several percent between runs),
  /// and each strategy a plan adds is another synchronizer with buckets of its own.
  double min_gain = 0.02;
  /// When set, only candidates it accepts are offered (e.g. the strategies a program was
  /// compiled with).
  std::function<bool(const strategy_descriptor&)> offer;
};

/// The strategies the search may give `v` on `c`, as canonical strings.
inline std::vector<std::string> candidates(const variable_profile& v, const cluster& c, const auto_options& o = {}) {
  std::vector<std::string> out;
  auto add = [&](const std::string& text) {
    const strategy_descriptor d = parse_strategy(text);
    if (!o.offer || o.offer(d)) out.push_back(to_string(d));
  };
  std::vector<int> shards = {1};
  for (int k = 2; k <= c.ranks && static_cast<std::size_t>(k) <= v.rows(); k *= 2) shards.push_back(k);
  if (v.sparse) {
    add("Replicate,AllReduce<Ring>,SparseRows");
    for (int k : shards) add(k == 1 ? "PS<1>,SparseRows" : fmt::format("PS<{}>,Partition<0>,SparseRows", k));
  } else {
    for (const char* algorithm : {"Ring", "Tree", "Hierarchical", "Native"}) {
      add(fmt::format("Replicate,AllReduce<{}>", algorithm));
      for (const std::string& codec : o.compression) add(fmt::format("Replicate,AllReduce<{}>,Compress<{}>", algorithm, codec));
    }
    if (o.allow_parameter_server)
      for (int k : shards) add(k == 1 ? "PS<1>" : fmt::format("PS<{}>,Partition<0>", k));
  }
  if (out.empty())
    throw usage_error(fmt::format("auto_strategy: no candidate strategy for \"{}\" is offered; allow more (auto_options)", v.name));
  return out;
}

/// What the search chose for one variable, and what the next best choices would cost.
struct variable_choice {
  std::string strategy;
  /// The predicted step if this variable alone took another strategy, best first.
  std::vector<std::pair<std::string, double>> alternatives;
};

/// A whole plan and its predicted step.
struct scored_plan {
  std::string name;
  std::vector<std::string> strategies;
  double predicted_s = 0.0;
};

struct strategy_plan {
  std::vector<std::string> strategies;  ///< one canonical string per variable
  step_cost predicted;
  std::vector<variable_choice> choices;
  /// Plans giving every variable of a gradient form one strategy, predicted, best first.
  std::vector<scored_plan> uniform;
};


/// The plan the cost model predicts fastest for `variables` (see the header comment).
inline strategy_plan auto_strategy(std::span<const variable_profile> variables, const cost_model& model,
                                   const auto_options& options = {}) {
  if (variables.empty()) throw usage_error("auto_strategy: the model has no variables");
  std::vector<std::vector<std::string>> offered;
  std::vector<std::vector<strategy_descriptor>> offered_d;
  for (const variable_profile& v : variables) {
    offered.push_back(candidates(v, model.target(), options));
    offered_d.push_back(parse_strategies(offered.back()));
  }

  // Uniform plans: every dense variable on one candidate (the first dense variable's), every
  // sparse one on another; a variable that cannot take it (more shards than rows) takes its
  // first candidate. The best is where the search starts.
  const auto first = [&](bool sparse) -> std::ptrdiff_t {
    const auto at = std::ranges::find(variables, sparse, &variable_profile::sparse);
    return at == variables.end() ? -1 : at - variables.begin();
  };
  const std::ptrdiff_t first_dense = first(false), first_sparse = first(true);
  const std::vector<std::string> none = {""};
  const std::vector<std::string>& dense = first_dense >= 0 ? offered[static_cast<std::size_t>(first_dense)] : none;
  const std::vector<std::string>& sparse = first_sparse >= 0 ? offered[static_cast<std::size_t>(first_sparse)] : none;
  strategy_plan best;
  double best_s = INFINITY;
  std::vector<std::size_t> chosen;  // per variable, its candidate
  for (const std::string& d : dense)
    for (const std::string& s : sparse) {
      std::vector<std::size_t> pick;
      std::vector<strategy_descriptor> plan;
      std::vector<std::string> uniform;
      for (std::size_t i = 0; i < variables.size(); ++i) {
        const auto at = std::ranges::find(offered[i], variables[i].sparse ? s : d);
        pick.push_back(at == offered[i].end() ? 0 : static_cast<std::size_t>(at - offered[i].begin()));
        plan.push_back(offered_d[i][pick.back()]);
        uniform.push_back(offered[i][pick.back()]);
      }
      const double seconds = model.predict(variables, plan).total();
      if (seconds < best_s) best_s = seconds, chosen = pick;
      best.uniform.push_back({first_dense >= 0 && first_sparse >= 0 ? d + " + " + s : d + s, std::move(uniform), seconds});
    }
  std::ranges::stable_sort(best.uniform, {}, &scored_plan::predicted_s);

  // Improvement: one variable at a time, to its best candidate given the others.
  std::vector<strategy_descriptor> current;
  for (std::size_t i = 0; i < variables.size(); ++i) current.push_back(offered_d[i][chosen[i]]);
  for (int pass = 0; pass < options.improvement_passes; ++pass) {
    bool moved = false;
    for (std::size_t i = 0; i < variables.size(); ++i)
      for (std::size_t k = 0; k < offered[i].size(); ++k) {
        if (k == chosen[i]) continue;
        const strategy_descriptor kept = current[i];
        current[i] = offered_d[i][k];
        const double seconds = model.predict(variables, current).total();
        if (seconds < best_s * (1 - std::max(options.min_gain, 1e-9))) {
          best_s = seconds;
          chosen[i] = k;
          moved = true;
        } else {
          current[i] = kept;
        }
      }
    if (!moved) break;
  }

  // What each choice beat.
  for (std::size_t i = 0; i < variables.size(); ++i) {
    best.strategies.push_back(offered[i][chosen[i]]);
    variable_choice choice{best.strategies[i], {}};
    for (std::size_t k = 0; k < offered[i].size(); ++k) {
      if (k == chosen[i]) continue;
      const strategy_descriptor kept = current[i];
      current[i] = offered_d[i][k];
      choice.alternatives.emplace_back(offered[i][k], model.predict(variables, current).total());
      current[i] = kept;
    }
    std::ranges::stable_sort(choice.alternatives, {}, &std::pair<std::string, double>::second);
    best.choices.push_back(std::move(choice));
  }
  best.predicted = model.predict(variables, current);
  return best;
}

/// The plan as a table for people: consecutive variables that got the same strategy are one
/// row; each row says what the choice beat and by how much (for the variable of the row
/// whose runner-up would cost most).
inline std::string describe(const strategy_plan& plan, std::span<const variable_profile> variables) {
  const double step_ms = 1e3 * plan.predicted.total();
  std::string out = fmt::format("predicted synchronization per step: {:.3f} ms (all-reduce {:.3f} ms, parameter server {:.3f} ms)\n",
                                step_ms, 1e3 * plan.predicted.allreduce_s, 1e3 * plan.predicted.parameter_server_s);
  out += fmt::format("  {:<34} {:>5} {:>10}  {:<40} {}\n", "variables", "count", "MiB", "strategy",
                     "why: the step if these took the runner-up instead");
  struct row {
    std::string first, strategy, runner_up;
    std::size_t count = 0;
    double mib = 0, runner_up_ms = 0;
  };
  std::vector<row> rows;
  for (std::size_t i = 0; i < variables.size(); ++i) {
    const variable_choice& c = plan.choices[i];
    const std::string runner_up = c.alternatives.empty() ? std::string("-") : c.alternatives.front().first;
    if (rows.empty() || rows.back().strategy != c.strategy) rows.push_back({variables[i].name, c.strategy, "-", 0, 0.0, 0.0});
    row& r = rows.back();
    ++r.count;
    r.mib += variables[i].bytes() / (1 << 20);
    // The runner-up that would cost most: the row's strongest reason.
    if (!c.alternatives.empty() && 1e3 * c.alternatives.front().second > r.runner_up_ms)
      r.runner_up = runner_up, r.runner_up_ms = 1e3 * c.alternatives.front().second;
  }
  for (const row& r : rows)
    out += fmt::format("  {:<34} {:>5} {:>10.3f}  {:<40} {}\n", r.count > 1 ? r.first + " ..." : r.first, r.count, r.mib,
                       r.strategy,
                       r.runner_up == "-" ? std::string("the only candidate")
                                          : fmt::format("{} -> {:.3f} ms (+{:.3f})", r.runner_up, r.runner_up_ms,
                                                        r.runner_up_ms - step_ms));
  out += "  uniform plans (every variable of a gradient form on one strategy), predicted:\n";
  for (std::size_t i = 0; i < plan.uniform.size() && i < 5; ++i)
    out += fmt::format("    {:>9.3f} ms  {}\n", 1e3 * plan.uniform[i].predicted_s, plan.uniform[i].name);
  return out;
}

/// Builder B's plan for `variables` (its strategy for each, from their run-time shapes),
/// scored by the cost model with B's placement of parameter-server shards: AutoDist's
/// builders as candidates of the same search.
template <StrategyBuilder B>
scored_plan builder_plan(std::string name, std::span<const variable_profile> variables, const calibration& c, cluster job,
                         cost_options options = {}) {
  std::vector<strategy_descriptor> strategies;
  for (const variable_profile& v : variables) strategies.push_back(B::describe(v.shape, v.sparse));
  options.servers = B::servers;
  const double predicted = cost_model(c, job, {}, options).predict(variables, strategies).total();
  std::vector<std::string> names;
  for (const strategy_descriptor& d : strategies) names.push_back(to_string(d));
  return {std::move(name), std::move(names), predicted};
}

/// The plans worth a trial run (AutoDist's low-shot trials): the automatic plan, then the
/// best uniform plans that differ from it, `k` in all at most. Time a few steps of each and
/// keep the fastest: the trial corrects what the model gets wrong about this machine.
inline std::vector<scored_plan> trial_candidates(const strategy_plan& plan, int k) {
  std::vector<scored_plan> out = {{"auto", plan.strategies, plan.predicted.total()}};
  for (const scored_plan& u : plan.uniform)
    if (static_cast<int>(out.size()) < k && std::ranges::none_of(out, [&](const scored_plan& o) { return o.strategies == u.strategies; }))
      out.push_back(u);
  return out;
}

}  // namespace strata::plan
