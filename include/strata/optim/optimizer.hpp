#pragma once
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "strata/error.hpp"
#include "strata/optim/adagrad.hpp"
#include "strata/optim/adam.hpp"
#include "strata/optim/sgd.hpp"

namespace strata {

namespace optim {
/// How a variable's gradients arrive: what an optimizer may choose its state by.
enum class gradient_form { dense, sparse_rows };
}  // namespace optim

/// An optimizer owns no per-variable memory itself: it makes a state per variable and
/// updates a parameter from its averaged gradient and that state. The state's tensors,
/// each shaped like the parameter, are named for checkpoints.
template <class O>
concept Optimizer = std::copyable<O> && requires(const O& o, std::span<float> p, std::span<const float> g,
                                                 typename O::state& s, std::size_t n, std::int64_t step) {
  { o.make_state(n) } -> std::same_as<typename O::state>;
  o.update(p, g, s, step);
  { O::tensors(s) } -> std::same_as<std::vector<optim::named_state>>;
};

/// An optimizer that can update part of a tensor against that part's state, at `offset`:
/// what a parameter server applies to the rows a sparse gradient touched.
template <class O>
concept RowOptimizer = Optimizer<O> && requires(const O& o, std::span<float> p, std::span<const float> g,
                                                typename O::state& s, std::int64_t step, std::size_t offset) {
  o.update(p, g, s, step, offset);
};

/// Optimizers that treat dense and SparseRows variables differently also take the
/// variable's gradient form (optim::dense_and_sparse); the others ignore it.
template <Optimizer O>
typename O::state make_state_for(const O& optimizer, std::size_t elements, optim::gradient_form form) {
  if constexpr (requires { optimizer.make_state(elements, form); }) return optimizer.make_state(elements, form);
  else return optimizer.make_state(elements);
}

/// An optimizer's hyper-parameters with their ranges; none for optimizers that do not list
/// them (a user's own, say), which are then neither checked nor compared across ranks.
template <class O>
std::vector<optim::hyper_parameter> hyper_parameters_of(const O& optimizer) {
  if constexpr (requires { optimizer.hyper_parameters(); }) return optimizer.hyper_parameters();
  else return {};
}

/// Throws usage_error unless every hyper-parameter of `optimizer` lies in its range, found
/// at start-up (`update` 0) or before update `update`.
template <class O>
void check_hyper_parameters(const O& optimizer, std::int64_t update) {
  for (const optim::hyper_parameter& h : hyper_parameters_of(optimizer))
    if (!h.allowed())
      throw usage_error("the optimizer's " + h.name + " is " + h.value_text() + " " +
                        (update == 0 ? std::string("at start-up") : "at update " + std::to_string(update)) +
                        "; it must be a number in " + h.range());
}

/// Checks an optimizer's hyper-parameters whenever they may have changed: at start-up, and
/// before an update after a schedule changed them. For trivially copyable optimizers an
/// unchanged one costs a comparison of bytes; others are checked before every update.
template <class O>
class hyper_parameter_check {
 public:
  /// Throws usage_error as check_hyper_parameters; `update` 0 is start-up.
  void check(const O& optimizer, std::int64_t update) {
    if constexpr (std::is_trivially_copyable_v<O>)
      if (checked_ && std::memcmp(static_cast<const void*>(&*checked_), static_cast<const void*>(&optimizer), sizeof(O)) == 0)
        return;
    check_hyper_parameters(optimizer, update);
    // An optimizer whose state depends on a hyper-parameter (SGD's velocity exists only with
    // momentum) says when its state, made at start-up, cannot serve the new values.
    if constexpr (requires { { optimizer.state_refuses(optimizer) } -> std::convertible_to<std::string>; })
      if (made_with_)
        if (const std::string why = optimizer.state_refuses(*made_with_); !why.empty())
          throw usage_error("the optimizer's hyper-parameters at update " + std::to_string(update) + ": " + why);
    if (!made_with_) made_with_ = optimizer;
    checked_ = optimizer;
  }

 private:
  std::optional<O> checked_;    // as last found in range
  std::optional<O> made_with_;  // as at start-up, when the state was made
};

/// Bytes of one variable's optimizer state.
template <Optimizer O>
std::size_t state_bytes(typename O::state& s) {
  std::size_t bytes = 0;
  for (const optim::named_state& t : O::tensors(s)) bytes += t.values.size_bytes();
  return bytes;
}

static_assert(RowOptimizer<optim::sgd> && RowOptimizer<optim::adam> && RowOptimizer<optim::adagrad>);

}  // namespace strata
