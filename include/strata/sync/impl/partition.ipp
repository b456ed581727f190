#pragma once
// Partitioning a variable: compiled in every translation unit when strata is header-only, once under
// STRATA_SEPARATE_COMPILATION (see config.hpp).
#include "strata/sync/partition.hpp"

namespace strata::sync {

STRATA_DECL std::vector<part_layout> partition_layout(const std::vector<std::size_t>& shape, std::size_t elements, int axis,
                                                      int parts) {
  if (axis < 0 || parts <= 1 || shape.empty()) {
    const std::size_t rows = shape.empty() ? elements : shape[0];
    return {{{{0, elements}}, rows, rows == 0 ? 0 : elements / rows}};
  }
  const auto a = static_cast<std::size_t>(axis);
  const std::size_t extent = shape[a];
  const std::size_t outer = std::accumulate(shape.begin(), shape.begin() + axis, std::size_t{1}, std::multiplies<>());
  const std::size_t inner = std::accumulate(shape.begin() + axis + 1, shape.end(), std::size_t{1}, std::multiplies<>());
  const int count = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(parts), std::max<std::size_t>(extent, 1)));
  std::vector<part_layout> layout;
  for (int k = 0; k < count; ++k) {
    const segment s = ring_segment(extent, count, k);
    part_layout part;
    for (std::size_t o = 0; o < outer; ++o) part.blocks.push_back({(o * extent + s.begin) * inner, s.size * inner});
    part.rows = a == 0 ? s.size : shape[0];
    part.cols = part.rows == 0 ? 0 : s.size * inner * outer / part.rows;
    layout.push_back(std::move(part));
  }
  return layout;
}

}  // namespace strata::sync
