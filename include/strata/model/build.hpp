#pragma once
// Declaring a model with a strategy builder instead of per-variable strategies: the builder
// turns each variable's static shape and gradient form into its strategy, and the result is
// an ordinary model, e.g.
//
//   using B = build<builder::Parallax<>>;
//   auto m = make_model(B::variable<dims<1000000, 32>, SparseRows>("embedding", e, ge),  // PS<1>,SparseRows
//                       B::variable<dims<784, 256>>("fc1.weight", w, gw));               // Replicate,AllReduce<Ring>
#include <span>
#include <string>
#include <utility>

#include "strata/model/model.hpp"
#include "strata/model/variable.hpp"
#include "strata/strategy/builders.hpp"

namespace strata {

/// Variable declarations whose strategies builder `B` chooses.
template <StrategyBuilder B>
struct build {
  using builder = B;

  /// Declares a variable of shape `Shape` (`dims<...>`) with the strategy `B` gives it; its
  /// buffers must hold exactly the shape's number of elements (binding_error otherwise).
  template <class Shape, class Gradient = DenseGradient>
  static auto variable(std::string name, host_buffer param, host_buffer grad) {
    using V = variable_traits<Shape, Gradient>;
    return detail::declare<builder_strategy_t<B, V>, V::rank>(std::move(name), param, grad,
                                                              std::span<const std::size_t, V::rank>(V::extents));
  }
};

/// The model type of variables with traits `Vs...` under builder `B`, for adding variables
/// one by one: `builder_model_t<builder::PartitionedPS<>, variable_traits<dims<97, 3>>>`.
template <StrategyBuilder B, VariableTraits... Vs>
using builder_model_t = model_of<builder_strategy_t<B, Vs>...>;

}  // namespace strata
