#pragma once
// What every synchronizer of SparseRows variables shares: the checks of the rows and values
// a user hands in, and combining repeated rows.
#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "strata/error.hpp"
#include "strata/kernels/sparse_rows.hpp"
#include "strata/model/variable.hpp"

namespace strata::sync {

/// Elements per row of a table (a variable of shape [rows, ...]).
inline std::size_t row_width(const variable_binding& v) {
  return v.shape.empty() || v.shape[0] == 0 ? v.elements() : v.elements() / v.shape[0];
}

/// Every row exists, or binding_error names the first that does not.
inline void check_rows(const variable_binding& v, std::span<const std::uint32_t> rows, std::string_view call) {
  const std::size_t table_rows = v.shape.empty() ? 1 : v.shape[0];
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (rows[i] >= table_rows)
      throw binding_error(fmt::format("{}(\"{}\"): row {} (position {}) is out of range; the variable has {} rows", call,
                                      v.name, rows[i], i, table_rows));
}

/// `values` holds one full row per entry of `rows`, and the rows exist.
inline void check_sparse_gradient(const variable_binding& v, std::span<const std::uint32_t> rows,
                                  std::span<const float> values) {
  const std::size_t width = row_width(v);
  if (values.size() != rows.size() * width)
    throw binding_error(fmt::format("sparse_gradient(\"{}\"): {} rows of {} values need {} values, got {}", v.name,
                                    rows.size(), width, rows.size() * width, values.size()));
  check_rows(v, rows, "sparse_gradient");
}

/// Rows (any order, repeated) and their values, as unique sorted rows with the values of
/// repeated rows added in input order.
inline void combine_rows(std::span<const std::uint32_t> rows, std::span<const float> values, std::size_t width,
                         std::vector<std::uint32_t>& unique_rows, std::vector<float>& sums) {
  unique_rows.assign(rows.begin(), rows.end());
  std::ranges::sort(unique_rows);
  unique_rows.erase(std::unique(unique_rows.begin(), unique_rows.end()), unique_rows.end());
  std::vector<std::uint32_t> positions(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i)
    positions[i] = static_cast<std::uint32_t>(std::ranges::lower_bound(unique_rows, rows[i]) - unique_rows.begin());
  sums.assign(unique_rows.size() * width, 0.0f);
  kernels::scatter_add_rows(sums, width, positions, values);
}

}  // namespace strata::sync
