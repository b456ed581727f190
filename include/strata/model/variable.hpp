#pragma once
// A variable binds the user's own parameter and gradient memory, with a run-time shape and
// a compile-time strategy and rank.
#include <array>
#include <concepts>
#include <cstddef>
#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

// strategy.hpp first and directly: the rule checks below expand from it, and a compile error
// then names one include line above the rule, not the chain through canonical_string.hpp.
#include "strata/strategy/strategy.hpp"
//
#include "strata/error.hpp"
#include "strata/model/memory.hpp"
#include "strata/strategy/canonical_string.hpp"

namespace strata {

/// Host memory a variable binds: any contiguous floats. Bound from a std::vector, it also
/// remembers the vector, so that the executor's detail checks can tell that the vector has
/// not reallocated since (the executor would read freed memory).
struct host_buffer {
  std::span<float> values;
  const std::vector<float>* vector = nullptr;

  host_buffer() = default;
  host_buffer(float* data, std::size_t size) : values(data, size) {}
  host_buffer(std::vector<float>& v) : values(v), vector(&v) {}
  template <class R>
    requires std::convertible_to<R&&, std::span<float>> && (!std::same_as<std::remove_cvref_t<R>, std::vector<float>>)
  host_buffer(R&& r) : values(std::forward<R>(r)) {}
};

/// What every synchronizer sees of a variable, whatever its strategy.
struct variable_binding {
  std::string name;
  std::vector<std::size_t> shape;
  std::span<float> param;
  std::span<float> grad;
  std::string strategy;  ///< canonical string
  /// The std::vectors param and grad were bound from, if they were.
  const std::vector<float>* param_vector = nullptr;
  const std::vector<float>* grad_vector = nullptr;

  std::size_t elements() const { return param.size(); }
  std::size_t bytes() const { return param.size() * sizeof(float); }
  /// "parameter" or "gradient" when the std::vector that buffer was bound from has since
  /// reallocated or changed size; empty when both are in place (or not bound from vectors).
  std::string_view moved_buffer() const {
    const auto moved = [](const std::vector<float>* v, std::span<float> s) {
      return v && (v->data() != s.data() || v->size() != s.size());
    };
    return moved(param_vector, param) ? "parameter" : moved(grad_vector, grad) ? "gradient" : "";
  }
};

/// Handle of a variable inside a model, in declaration order.
struct variable_id {
  std::size_t index;
  friend bool operator==(variable_id, variable_id) = default;
};

/// A declared variable, before it joins a model. Rank is static so that rank-dependent
/// rules (partition axis, low-rank compression) are checked at compile time; so is the
/// memory its buffers live in (memory.hpp), so that only synchronizers of that memory
/// take it.
template <ValidStrategy S, std::size_t Rank, class Space = host_memory>
struct variable_declaration {
  using strategy = S;
  using memory_space = Space;
  variable_binding binding;  ///< for device_memory, spans over GPU memory: only a stage of it reads them
};

namespace detail {
template <ValidStrategy S, std::size_t Rank>
consteval bool check_rank_rules() {
  constexpr strategy_descriptor d = S::descriptor;
  static_assert(!d.partitioned() || static_cast<std::size_t>(d.partition_axis) < Rank,
                "PartitionAxisInRange: Partition<Axis> names an axis the variable does not have; Axis must be less "
                "than the number of dimensions");
  static_assert(!d.tensor_parallel() || static_cast<std::size_t>(d.tensor_axis) < Rank,
                "TensorAxisInRange: TensorParallel<Axis> names an axis the variable does not have; Axis must be less "
                "than the number of dimensions");
  static_assert(d.codec != codec_kind::powersgd || Rank == 2,
                "PowerSGDNeedsMatrix: Compress<PowerSGD<R>> factorizes 2-D gradients; use it for weight matrices and "
                "leave vectors and biases uncompressed");
  return true;
}

/// Declares a variable with strategy `S` and a shape of static rank: what `variable` and
/// `build<B>::variable` share. `variable` checks the rank rules itself, one call nearer the
/// user's line, so that their sentence comes in the first lines of the error.
template <ValidStrategy S, std::size_t Rank>
variable_declaration<S, Rank> declare(std::string name, host_buffer param, host_buffer grad,
                                      std::span<const std::size_t, Rank> shape) {
  static_assert(check_rank_rules<S, Rank>());
  const std::size_t elements = std::accumulate(shape.begin(), shape.end(), std::size_t{1}, std::multiplies<>());
  auto check = [&](std::span<float> buffer, std::string_view what) {
    if (buffer.size() != elements)
      throw binding_error(fmt::format("variable \"{}\": the {} buffer holds {} floats but shape [{}] needs {}; bind a "
                                      "buffer of exactly that size",
                                      name, what, buffer.size(), fmt::join(shape, ", "), elements));
  };
  check(param.values, "parameter");
  // Sparse gradients arrive as rows (executor::sparse_gradient): no dense gradient buffer.
  if (!(S::descriptor.sparse_rows && grad.values.empty())) check(grad.values, "gradient");
  return {variable_binding{std::move(name), std::vector<std::size_t>(shape.begin(), shape.end()), param.values,
                           grad.values, strategy_name<S>(), param.vector, grad.vector}};
}
}  // namespace detail

/// Declares a variable with strategy `S`, e.g.
/// `variable<Dense>("fc1.weight", w, gw, {256, 784})`.
/// Throws binding_error, naming the variable, when a buffer does not hold exactly the
/// shape's number of elements. SparseRows variables may bind an empty gradient: theirs is
/// given as rows each update.
///
/// Returns a variable_declaration<S, Rank>. `S` is formed by Strategy<...>, or spelled by hand
/// as a canonical_strategy<...> and checked here: the deduced return type lets the broken
/// rule be the first error, not a constraint failure in the signature.
template <CanonicalStrategy S, std::size_t Rank>
auto variable(std::string name, host_buffer param, host_buffer grad, const std::size_t (&shape)[Rank]) {
  using checked = S;
  STRATA_CHECK_EVERY_RULE
  static_assert(CanonicalSpelling<S>);
  static_assert(detail::check_rank_rules<detail::valid_or_default<S>, Rank>());
  return detail::declare<detail::valid_or_default<S>, Rank>(std::move(name), param, grad, std::span<const std::size_t, Rank>(shape));
}

/// Declares a variable over GPU memory with a host strategy `S`, for the staged executor
/// with a stage of GPU memory (cuda::pinned_stage): the host executor trains it through host
/// mirrors. The declaration's memory space is device_memory, so no host synchronizer takes
/// it directly.
template <CanonicalStrategy S, std::size_t Rank>
auto variable(std::string name, device_span<float> param, device_span<float> grad, const std::size_t (&shape)[Rank]) {
  using checked = S;
  STRATA_CHECK_EVERY_RULE
  static_assert(CanonicalSpelling<S>);
  using valid = detail::valid_or_default<S>;
  static_assert(detail::check_rank_rules<valid, Rank>());
  variable_declaration<valid, Rank> on_host = detail::declare<valid, Rank>(
      std::move(name), {param.data(), param.size()}, {grad.data(), grad.size()}, std::span<const std::size_t, Rank>(shape));
  return variable_declaration<valid, Rank, device_memory>{std::move(on_host.binding)};
}

/// The same with extents of another integer type (`{rows, cols}` with int rows), which a
/// std::size_t shape would take only with a narrowing warning. Throws binding_error for a
/// negative extent.
template <CanonicalStrategy S, std::integral I, std::size_t Rank>
  requires(!std::same_as<I, std::size_t>)
auto variable(std::string name, host_buffer param, host_buffer grad, const I (&shape)[Rank]) {
  using checked = S;
  STRATA_CHECK_EVERY_RULE
  static_assert(CanonicalSpelling<S>);
  static_assert(detail::check_rank_rules<detail::valid_or_default<S>, Rank>());
  std::array<std::size_t, Rank> extents{};
  for (std::size_t i = 0; i < Rank; ++i) {
    if (std::cmp_less(shape[i], 0))
      throw binding_error(fmt::format("variable \"{}\": extent {} of its shape is {}; extents must be 0 or more", name, i,
                                      shape[i]));
    extents[i] = static_cast<std::size_t>(shape[i]);
  }
  return detail::declare<detail::valid_or_default<S>, Rank>(std::move(name), param, grad,
                                                            std::span<const std::size_t, Rank>(extents));
}

}  // namespace strata
