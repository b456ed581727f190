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

/// The positions of `rows` in order of their rows, equal rows in input order: a stable LSD
/// radix sort by 11-bit digits, as many passes as the largest row needs (two for a
/// million-row table), each a count and a scatter of (row, position) pairs. Linear in the
/// entries, where a comparison sort of 12000 entries took most of a sparse step.
inline std::vector<std::uint32_t> positions_by_row(std::span<const std::uint32_t> rows) {
  constexpr unsigned digit_bits = 11, buckets = 1u << digit_bits;
  std::vector<std::uint64_t> pairs(rows.size()), scratch(rows.size());  // row << 32 | position
  std::uint32_t largest = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    pairs[i] = (std::uint64_t{rows[i]} << 32) | i;
    largest = std::max(largest, rows[i]);
  }
  for (unsigned shift = 32; shift < 64 && (std::uint64_t{largest} << 32) >> shift != 0; shift += digit_bits) {
    std::vector<std::size_t> start(buckets + 1, 0);
    for (const std::uint64_t p : pairs) ++start[((p >> shift) & (buckets - 1)) + 1];
    for (unsigned b = 0; b < buckets; ++b) start[b + 1] += start[b];
    for (const std::uint64_t p : pairs) scratch[start[(p >> shift) & (buckets - 1)]++] = p;
    pairs.swap(scratch);
  }
  std::vector<std::uint32_t> positions(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) positions[i] = static_cast<std::uint32_t>(pairs[i]);
  return positions;
}

/// `rows` once each, sorted.
inline std::vector<std::uint32_t> unique_sorted_rows(std::span<const std::uint32_t> rows) {
  std::vector<std::uint32_t> unique;
  unique.reserve(rows.size());
  for (const std::uint32_t i : positions_by_row(rows))
    if (unique.empty() || unique.back() != rows[i]) unique.push_back(rows[i]);
  return unique;
}

/// Rows (any order, repeated) and their values, as unique sorted rows with the values of
/// repeated rows added in input order. positions_by_row orders both at once, so each value
/// row is read once, where a sort of the rows, a binary search per entry and a sort of
/// positions took three passes.
inline void combine_rows(std::span<const std::uint32_t> rows, std::span<const float> values, std::size_t width,
                         std::vector<std::uint32_t>& unique_rows, std::vector<float>& sums) {
  unique_rows.clear();
  sums.clear();
  sums.reserve(rows.size() * width);
  for (const std::uint32_t i : positions_by_row(rows)) {
    if (unique_rows.empty() || unique_rows.back() != rows[i]) {
      unique_rows.push_back(rows[i]);
      sums.resize(sums.size() + width, 0.0f);
    }
    const float* value = values.data() + std::size_t{i} * width;
    float* sum = sums.data() + sums.size() - width;
    for (std::size_t j = 0; j < width; ++j) sum[j] += value[j];  // from 0.0f, as the first add always was
  }
}

}  // namespace strata::sync
