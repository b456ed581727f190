#pragma once
// What every synchronizer of SparseRows variables shares: the checks of the rows and values
// a user hands in, and combining repeated rows.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <optional>
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

/// How many rows ahead of its use a row of a large table is asked for (prefetch_row).
inline constexpr std::size_t rows_ahead = 8;

/// Asks the cache for a table row before it is read (or written: `write`). Rows of a large
/// table are visited in an order the hardware prefetcher cannot guess, so each visit would
/// otherwise wait for memory: asking `rows_ahead` rows early took 8% off a sparse PS step.
template <bool write = false>
inline void prefetch_row(const float* row, std::size_t width) {
  constexpr std::size_t line = 64 / sizeof(float);
  for (std::size_t at = 0; at < width; at += line) __builtin_prefetch(row + at, write ? 1 : 0);
  if (width > 0) __builtin_prefetch(row + width - 1, write ? 1 : 0);  // a row not aligned to lines ends in one more
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

/// Rows numbered in order of first appearance: an open-addressing hash index (row -> slot)
/// with linear probing. Combining repeated rows through it costs one lookup per entry, where
/// sorting every entry first (positions_by_row) read each entry's values a second time;
/// only the unique rows are sorted, when an order by row is needed. Kept from step to step,
/// so its table is allocated once.
class row_index {
 public:
  /// The slot of `row`: the next unused one the first time the row is seen.
  std::uint32_t slot(std::uint32_t row) {
    if (2 * (rows_.size() + 1) > entries_.size()) grow();
    for (std::size_t at = home(row);; at = (at + 1) & (entries_.size() - 1)) {
      const std::uint64_t entry = entries_[at];
      if (entry == 0) {
        rows_.push_back(row);
        entries_[at] = std::uint64_t{row} << 32 | rows_.size();  // slot + 1: 0 marks an empty entry
        return static_cast<std::uint32_t>(rows_.size() - 1);
      }
      if (entry >> 32 == row) return static_cast<std::uint32_t>(entry) - 1;
    }
  }

  /// The rows seen, by slot.
  std::span<const std::uint32_t> rows() const { return rows_; }
  std::size_t size() const { return rows_.size(); }

  /// The slots in order of their rows.
  std::vector<std::uint32_t> slots_by_row() const { return positions_by_row(rows_); }

  void clear() {
    std::ranges::fill(entries_, 0);
    rows_.clear();
  }

 private:
  std::size_t home(std::uint32_t row) const {  // Fibonacci hashing: the product's top bits
    return static_cast<std::size_t>((row * 0x9E3779B97F4A7C15ull) >> (64 - std::countr_zero(entries_.size())));
  }

  void grow() {
    entries_.assign(std::max<std::size_t>(64, 2 * entries_.size()), 0);
    for (std::size_t slot = 0; slot < rows_.size(); ++slot) {
      std::size_t at = home(rows_[slot]);
      while (entries_[at] != 0) at = (at + 1) & (entries_.size() - 1);
      entries_[at] = std::uint64_t{rows_[slot]} << 32 | (slot + 1);
    }
  }

  std::vector<std::uint64_t> entries_;  // row << 32 | (slot + 1); a power of two of them, at most half in use
  std::vector<std::uint32_t> rows_;
};

/// A batch's ids as a pull indexed them, kept for the gradient of the same batch: a worker
/// pulls the rows a batch needs and then gives their gradient with the same ids, and
/// combining the gradient hashed every id a second time and sorted the rows again.
class indexed_ids {
 public:
  /// Indexes `ids`: their unique rows by first appearance, each id's slot, the slots by row.
  void index(std::span<const std::uint32_t> ids) {
    ids_.assign(ids.begin(), ids.end());
    index_.clear();
    slots_.resize(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) slots_[i] = index_.slot(ids[i]);
    by_row_ = index_.slots_by_row();
    fresh_ = true;
  }
  /// Whether these are the ids last indexed, not yet taken.
  bool holds(std::span<const std::uint32_t> ids) const { return fresh_ && std::ranges::equal(ids, ids_); }

  /// The unique rows, sorted.
  std::vector<std::uint32_t> sorted_rows() const {
    std::vector<std::uint32_t> sorted(by_row_.size());
    for (std::size_t i = 0; i < by_row_.size(); ++i) sorted[i] = index_.rows()[by_row_[i]];
    return sorted;
  }

 private:
  friend class row_sums;
  std::vector<std::uint32_t> ids_, slots_, by_row_;
  row_index index_;
  bool fresh_ = false;
};

/// `rows` once each, sorted.
inline std::vector<std::uint32_t> unique_sorted_rows(std::span<const std::uint32_t> rows) {
  indexed_ids indexed;
  indexed.index(rows);
  return indexed.sorted_rows();
}

/// Gradient rows summed by row as they are given: each row once, by slot (order of first
/// appearance), the values of repeated rows added in input order from 0.0f, so every rank
/// combining the same entries gets the same sums, bit for bit. Micro-batches add into the
/// same sums; clear() starts the next update.
class row_sums {
 public:
  explicit row_sums(std::size_t width = 1) : width_(width) {}

  void add(std::span<const std::uint32_t> rows, std::span<const float> values) {
    by_row_.reset();
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const std::size_t at = std::size_t{index_.slot(rows[i])} * width_;
      if (at == sums_.size()) sums_.resize(at + width_, 0.0f);
      float* sum = sums_.data() + at;
      const float* value = values.data() + i * width_;
      for (std::size_t j = 0; j < width_; ++j) sum[j] += value[j];
    }
  }

  std::size_t width() const { return width_; }
  std::size_t size() const { return index_.size(); }
  bool empty() const { return index_.size() == 0; }
  std::span<const std::uint32_t> rows() const { return index_.rows(); }
  std::span<float> sums() { return sums_; }
  std::span<const float> sum(std::size_t slot) const {
    return std::span<const float>(sums_).subspan(slot * width_, width_);
  }
  /// The slots in order of their rows, sorted once after the last add (not from two threads at once).
  std::span<const std::uint32_t> slots_by_row() const {
    if (!by_row_) by_row_ = index_.slots_by_row();
    return *by_row_;
  }

  /// add(ids, values) into empty sums, where `known` indexed these ids (and gives its index
  /// up): the same sums, bit for bit, without hashing an id or sorting a row again.
  void add_indexed(indexed_ids& known, std::span<const float> values) {
    if (!empty() || !known.fresh_) throw usage_error("internal: add_indexed needs empty sums and freshly indexed ids");
    std::swap(index_, known.index_);
    by_row_ = std::move(known.by_row_);
    known.fresh_ = false;
    sums_.resize(index_.size() * width_);
    std::uint32_t seen = 0;  // slots are numbered by first appearance
    for (std::size_t i = 0; i < known.slots_.size(); ++i) {
      const std::uint32_t slot = known.slots_[i];
      float* sum = sums_.data() + std::size_t{slot} * width_;
      const float* value = values.data() + i * width_;
      if (slot == seen) {  // the row's first entry
        for (std::size_t j = 0; j < width_; ++j) sum[j] = 0.0f + value[j];  // as add(): from 0.0f
        ++seen;
      } else {
        for (std::size_t j = 0; j < width_; ++j) sum[j] += value[j];
      }
    }
  }

  void clear() {
    index_.clear();
    sums_.clear();
    by_row_.reset();
  }

 private:
  std::size_t width_;
  row_index index_;
  std::vector<float> sums_;  // size() rows of width_
  mutable std::optional<std::vector<std::uint32_t>> by_row_;  // the slots by row, once sorted
};

}  // namespace strata::sync
