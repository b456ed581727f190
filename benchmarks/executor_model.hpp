#pragma once
// A model of given tensors under one strategy, with its executor: what the synchronization
// benchmarks step. Every tensor is declared flat (its element count), as DDP's buckets see it.
#include <optional>
#include <vector>

#include <strata/strata.hpp>

#include "model_shapes.hpp"

namespace bench {

/// Where the gradients live: each in an allocation of its own (as a framework's tensors
/// are, and DDP's buckets see them), or all in one strata::tensor_arena, laid out as the
/// buckets fill.
enum class gradient_memory { separate, one_arena };

template <class S, class O>
struct executor_model {
  std::vector<strata::host_vector<float>> params, grads;  // grads: separate gradients only
  std::optional<strata::tensor_arena<float>> arena;      // the gradients in one allocation
  strata::model<S> model;
  std::optional<strata::executor<strata::mpi::context, strata::model<S>, O>> exec;

  /// Collective. Parameters start at `param`, gradients at `gradient`, and stay put if O
  /// does not update (bench::no_update), so every step moves the same values.
  executor_model(strata::mpi::context& ctx, const std::vector<tensor_shape>& shapes, O optimizer,
                 const strata::executor_options& options = {}, float param = 0.0f, float gradient = 1.0f,
                 gradient_memory memory = gradient_memory::separate) {
    std::vector<std::size_t> elements;
    for (const auto& s : shapes) {
      params.emplace_back(s.elements(), param);
      elements.push_back(s.elements());
      if (memory == gradient_memory::separate) grads.emplace_back(s.elements(), gradient);
    }
    if (memory == gradient_memory::one_arena)
      arena.emplace(elements, strata::tensor_arena<float>::layout::backward, gradient);
    for (std::size_t i = 0; i < shapes.size(); ++i)
      model.add(strata::variable<S>(shapes[i].name, params[i], arena ? (*arena)[i] : std::span<float>(grads[i]),
                                    {shapes[i].elements()}));
    exec.emplace(ctx, model, optimizer, options);
  }

  /// One update: every gradient marked ready in backward order, then step().
  void step() {
    for (std::size_t i = grads.size(); i-- > 0;) exec->grad_ready(strata::variable_id{i});
    exec->step();
  }
};

}  // namespace bench
