#pragma once
// A libtorch module trained through strata: each parameter's data and gradient memory is bound
// as a strata variable (weights under one strategy, biases under its vector form), and autograd
// marks each gradient ready the moment it has been accumulated, so the executor's buckets start
// during backward. The hook is the one DDP's reducer uses: a post hook on the parameter's
// gradient accumulator, which runs after the gradient is in `param.grad()`. The gradients are
// views into one strata::tensor_arena, as DDP's gradient_as_bucket_view makes them views into
// its buckets: each bucket is then one range of memory.
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/torch.h>

#include <strata/strata.hpp>

namespace torch_binding {

/// The parameters of `module` bound to a strata model: matrices (and higher-rank weights,
/// flattened to rows x the rest) under `Matrix`, one-dimensional ones under its vector form.
/// Gradients are allocated here, once, in one tensor_arena laid out as the buckets fill:
/// autograd then accumulates into that memory in place for as long as nobody sets them to
/// none. Each gradient tensor keeps the arena alive, so they outlive this object safely.
template <strata::ValidStrategy Matrix, class Vector = strata::vector_strategy_t<Matrix>>
class bound_module {
 public:
  using model_type = strata::model_of<Matrix, Vector>;

  explicit bound_module(torch::nn::Module& module) {
    std::vector<std::size_t> elements;
    for (const auto& item : module.parameters()) elements.push_back(static_cast<std::size_t>(item.numel()));
    auto arena = std::make_shared<strata::tensor_arena<float>>(elements);
    std::size_t index = 0;
    for (auto& item : module.named_parameters()) {
      const std::string& name = item.key();
      torch::Tensor& param = item.value();
      if (param.scalar_type() != torch::kFloat32 || !param.device().is_cpu() || !param.is_contiguous())
        throw strata::usage_error(fmt::format("parameter {} is {} on {}{}: strata binds contiguous float32 CPU tensors",
                                              name, std::string(c10::toString(param.scalar_type())),
                                              param.device().str(), param.is_contiguous() ? "" : ", not contiguous"));
      const std::span<float> grad = (*arena)[index++];
      param.mutable_grad() = torch::from_blob(grad.data(), param.sizes(), [arena](void*) {}, torch::kFloat32);
      std::span<float> data(param.data_ptr<float>(), static_cast<std::size_t>(param.numel()));
      const auto rows = static_cast<std::size_t>(param.size(0));
      ids_.push_back(param.dim() >= 2 ? model_.add(strata::variable<Matrix>(name, data, grad, {rows, data.size() / rows}))
                                      : model_.add(strata::variable<Vector>(name, data, grad, {rows})));
      params_.push_back(param);
      names_.push_back(name);
      grads_.push_back(grad.data());
    }
  }

  model_type& model() { return model_; }

  /// Marks each gradient ready with `exec` as autograd finishes it; call once, with the
  /// executor made from model(). The hooks are removed when this object goes.
  template <class Executor>
  void mark_ready_during_backward(Executor& exec) {
    for (std::size_t i = 0; i < params_.size(); ++i) {
      auto accumulator = torch::autograd::impl::grad_accumulator(params_[i]);
      const strata::variable_id id = ids_[i];
      const auto key = accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
          [&exec, id](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
            exec.grad_ready(id);
            return outputs;
          }));
      hooks_.push_back({std::move(accumulator), key});  // the accumulator lives only while referenced
    }
  }

  /// Zeroes the gradients in place, where strata reads them.
  void zero_gradients() {
    for (auto& p : params_) p.grad().zero_();
  }

  /// Throws when autograd put a gradient in new memory (someone set it to none, or replaced
  /// it): strata would otherwise average stale values.
  void check_gradients_in_place() const {
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (!params_[i].grad().defined() || params_[i].grad().data_ptr<float>() != grads_[i])
        throw strata::usage_error(fmt::format(
            "the gradient of {} is no longer the memory strata bound; zero gradients in place "
            "(zero_gradients(), or zero_grad(/*set_to_none=*/false)) instead of setting them to none",
            names_[i]));
  }

  ~bound_module() {
    for (auto& [accumulator, key] : hooks_) accumulator->del_post_hook(key);
  }
  bound_module(const bound_module&) = delete;
  bound_module& operator=(const bound_module&) = delete;

 private:
  model_type model_;
  std::vector<strata::variable_id> ids_;
  std::vector<torch::Tensor> params_;
  std::vector<std::string> names_;
  std::vector<const float*> grads_;
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, std::uintptr_t>> hooks_;
};

}  // namespace torch_binding
