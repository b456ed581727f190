#pragma once
// A model: the variables of one training program, each bound to the user's memory, grouped
// by strategy. The set of strategies is part of the type, so an executor can instantiate one
// synchronizer per strategy; the variables themselves are run-time data, so layers built in
// loops can be added one by one.
#include <cstddef>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include <boost/hana.hpp>

#include "strata/model/variable.hpp"

namespace strata {

template <ValidStrategy... Strategies>
class model {
 public:
  using strategies = boost::hana::tuple<boost::hana::type<Strategies>...>;
  static constexpr std::size_t strategy_count = sizeof...(Strategies);

  template <class S>
  static constexpr std::size_t strategy_index() {
    constexpr std::size_t index = [] {
      std::size_t i = 0;
      ((std::is_same_v<S, Strategies> ? false : (++i, true)) && ...);
      return i;
    }();
    static_assert(index < strategy_count, "model::add<S>: S is not one of this model's strategies; declare the model "
                                          "with it (model<S1, S2, ...>) or use make_model");
    return index;
  }

  /// Adds a variable; throws binding_error if its name is already taken.
  template <ValidStrategy S, std::size_t Rank, class Space>
  variable_id add(variable_declaration<S, Rank, Space> declaration) {
    static_assert(std::is_same_v<Space, host_memory>,
                  "MemorySpace: a model's variables are read by the host synchronizers, so they bind host memory; a "
                  "variable over GPU memory (device_span) trains with staged_executor (host strategies through a stage "
                  "of GPU memory) or is declared with device_variable<S> for the nccl executor");
    for (const auto& v : variables_)
      if (v.name == declaration.binding.name)
        throw binding_error(fmt::format("variable \"{}\" is declared twice; every variable needs its own name", v.name));
    variables_.push_back(std::move(declaration.binding));
    strategy_of_.push_back(strategy_index<S>());
    return {variables_.size() - 1};
  }

  std::span<const variable_binding> variables() const { return variables_; }
  /// Variable `id`'s binding and the index of its strategy; throw binding_error for an id not
  /// of this model.
  const variable_binding& operator[](variable_id id) const { return variables_[checked(id)]; }
  std::size_t strategy_of(variable_id id) const { return strategy_of_[checked(id)]; }

  /// The id of the variable called `name`; throws binding_error listing no match.
  variable_id id(std::string_view name) const {
    for (std::size_t i = 0; i < variables_.size(); ++i)
      if (variables_[i].name == name) return {i};
    throw binding_error(fmt::format("no variable called \"{}\" in this model", name));
  }

  /// Ids of the variables with strategy `S`, in declaration order.
  template <class S>
  std::vector<variable_id> ids_of() const {
    std::vector<variable_id> out;
    for (std::size_t i = 0; i < variables_.size(); ++i)
      if (strategy_of_[i] == strategy_index<S>()) out.push_back({i});
    return out;
  }

 private:
  std::size_t checked(variable_id id) const {
    if (id.index >= variables_.size())
      throw binding_error(fmt::format("variable id {} is not one of this model's {} variables; use the id that add() or "
                                      "id(name) returned", id.index, variables_.size()));
    return id.index;
  }

  std::vector<variable_binding> variables_;
  std::vector<std::size_t> strategy_of_;
};

template <class M>
inline constexpr bool is_model = false;
template <ValidStrategy... Strategies>
inline constexpr bool is_model<model<Strategies...>> = true;

/// A model<Strategies...>: what the host executor trains.
template <class M>
concept Model = is_model<M>;

namespace detail {
/// The distinct types of a list, in order of first appearance.
template <class... Strategies>
constexpr auto distinct_strategies() {
  namespace hana = boost::hana;
  return hana::fold_left(hana::tuple_t<Strategies...>, hana::tuple_t<>, [](auto seen, auto s) {
    return hana::if_(hana::contains(seen, s), seen, hana::append(seen, s));
  });
}
template <class... Strategies>
constexpr auto model_type() {
  return boost::hana::unpack(distinct_strategies<Strategies...>(),
                             [](auto... s) { return boost::hana::type_c<model<typename decltype(s)::type...>>; });
}
}  // namespace detail

/// The model type for some strategies, duplicates removed (e.g. `model_of<S, vector_strategy_t<S>>`).
template <ValidStrategy... Strategies>
using model_of = typename decltype(detail::model_type<Strategies...>())::type;

/// Builds a model from variable declarations; its strategies are the distinct ones declared.
template <class... Declarations>
auto make_model(Declarations... declarations) {
  model_of<typename Declarations::strategy...> m;
  (m.add(std::move(declarations)), ...);
  return m;
}

}  // namespace strata
