#pragma once
// The host executor's start-up handshake: every rank must run the same model (names,
// shapes, element type, canonical strategies, in one order) with the same library version
// and world size, or the collectives would pair up unrelated buffers. The signatures are
// gathered over a host communicator and compared by check_signatures (signature_check.hpp);
// a mismatch is reported on every rank, naming the first differing variable and the ranks
// that differ.
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "strata/comm/communicator.hpp"
#include "strata/config.hpp"
#include "strata/error.hpp"
#include "strata/exec/signature_check.hpp"
#include "strata/model/variable.hpp"

namespace strata {

/// One line per fact: the library and world first, then every variable.
inline std::vector<std::string> model_signature(std::span<const variable_binding> variables, int world_size) {
  std::vector<std::string> lines = {
      fmt::format("strata {}.{}.{} with {} ranks", version_major, version_minor, version_patch, world_size)};
  for (const variable_binding& v : variables)
    lines.push_back(fmt::format("variable \"{}\" [{}] float32 {}", v.name, fmt::join(v.shape, ","), v.strategy));
  return lines;
}

namespace detail {

/// Every rank's lines, gathered on every rank (variable-length texts through two
/// fixed-size all-gathers: the lengths, then the texts padded to the longest).
template <Communicator C>
std::vector<std::vector<std::string>> gather_lines(C& comm, const std::vector<std::string>& lines) {
  std::string text = join_lines(lines);
  const std::uint64_t mine = text.size();
  std::vector<std::uint64_t> sizes(static_cast<std::size_t>(comm.size()));
  comm.allgather(std::span<const std::uint64_t>(&mine, 1), std::span<std::uint64_t>(sizes));
  const std::uint64_t longest = *std::max_element(sizes.begin(), sizes.end());
  text.resize(longest, '\0');
  std::string all(longest * sizes.size(), '\0');
  comm.allgather(std::span<const char>(text), std::span<char>(all));
  std::vector<std::vector<std::string>> result;
  for (std::size_t r = 0; r < sizes.size(); ++r)
    result.push_back(split_lines(std::string_view(all.data() + r * longest, sizes[r])));
  return result;
}

}  // namespace detail

/// Compares this rank's signature with every other rank's; throws signature_error on every
/// rank if any differ. A collective on `comm`: every rank must call it.
template <Communicator C>
void verify_signature(C& comm, const std::vector<std::string>& lines) {
  check_signatures(detail::gather_lines(comm, lines));
}

}  // namespace strata
