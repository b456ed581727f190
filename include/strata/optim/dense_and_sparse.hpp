#pragma once
// One optimizer for dense variables and another for SparseRows ones: the usual pairing of
// recommendation models, Adam for the MLP and Adagrad for the embeddings, whose rows are seen
// too rarely for Adam's moment estimates. The executor still takes one optimizer; this one
// chooses per variable when the variable's state is made.
#include <cstdint>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

#include "strata/optim/named_state.hpp"
#include "strata/optim/optimizer.hpp"

namespace strata::optim {

template <RowOptimizer Dense, RowOptimizer Sparse>
struct dense_and_sparse {
  Dense dense;    ///< variables with dense gradients
  Sparse sparse;  ///< variables with SparseRows

  struct state {
    std::variant<typename Dense::state, typename Sparse::state> of;
  };

  /// A variable whose gradient form is not known is dense.
  state make_state(std::size_t elements) const { return make_state(elements, gradient_form::dense); }
  state make_state(std::size_t elements, gradient_form form) const {
    if (form == gradient_form::sparse_rows) return {sparse.make_state(elements)};
    return {dense.make_state(elements)};
  }

  std::vector<hyper_parameter> hyper_parameters() const {
    std::vector<hyper_parameter> all;
    for (std::string_view prefix : {"dense.", "sparse."})
      for (hyper_parameter h : prefix == "dense." ? hyper_parameters_of(dense) : hyper_parameters_of(sparse)) {
        h.name.insert(0, prefix);
        all.push_back(std::move(h));
      }
    return all;
  }

  static std::vector<named_state> tensors(state& s) {
    if (auto* d = std::get_if<0>(&s.of)) return Dense::tensors(*d);
    return Sparse::tensors(std::get<1>(s.of));
  }

  /// Updates with the optimizer that made `s`.
  void update(std::span<float> param, std::span<const float> grad, state& s, std::int64_t step,
              std::size_t offset = 0) const {
    if (auto* d = std::get_if<0>(&s.of)) dense.update(param, grad, *d, step, offset);
    else sparse.update(param, grad, std::get<1>(s.of), step, offset);
  }
};

static_assert(RowOptimizer<dense_and_sparse<adam, adagrad>>);

}  // namespace strata::optim
