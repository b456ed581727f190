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
/// repeated rows added in input order. One sort of (row, position) keys orders both at
/// once, so equal rows meet in input order and each value row is read once, where a sort of
/// the rows, a binary search per entry and a sort of positions did three passes.
inline void combine_rows(std::span<const std::uint32_t> rows, std::span<const float> values, std::size_t width,
                         std::vector<std::uint32_t>& unique_rows, std::vector<float>& sums) {
  std::vector<std::uint64_t> keys(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) keys[i] = (std::uint64_t{rows[i]} << 32) | i;
  std::ranges::sort(keys);
  unique_rows.clear();
  sums.clear();
  sums.reserve(rows.size() * width);
  for (const std::uint64_t key : keys) {
    const auto row = static_cast<std::uint32_t>(key >> 32);
    const float* value = values.data() + (key & 0xffff'ffffu) * width;
    if (unique_rows.empty() || unique_rows.back() != row) {
      unique_rows.push_back(row);
      sums.resize(sums.size() + width, 0.0f);
    }
    float* sum = sums.data() + sums.size() - width;
    for (std::size_t j = 0; j < width; ++j) sum[j] += value[j];  // from 0.0f, as the first add always was
  }
}

}  // namespace strata::sync
