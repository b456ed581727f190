#pragma once
// The start-up handshake: every rank must run the same model (names, shapes, element type,
// canonical strategies, in one order) with the same library version and world size, or the
// collectives would pair up unrelated buffers. A mismatch is reported on every rank, naming
// the first differing variable and the ranks that differ.
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
#include "strata/model/variable.hpp"

namespace strata {

/// The ranks disagree about the model.
class signature_error : public error {
 public:
  using error::error;
};

/// One line per fact: the library and world first, then every variable.
inline std::vector<std::string> model_signature(std::span<const variable_binding> variables, int world_size) {
  std::vector<std::string> lines = {
      fmt::format("strata {}.{}.{} with {} ranks", version_major, version_minor, version_patch, world_size)};
  for (const variable_binding& v : variables)
    lines.push_back(fmt::format("variable \"{}\" [{}] float32 {}", v.name, fmt::join(v.shape, ","), v.strategy));
  return lines;
}

namespace detail {

/// Every rank's lines, gathered on every rank (variable-length strings through two
/// fixed-size all-gathers: the lengths, then the texts padded to the longest).
template <Communicator C>
std::vector<std::vector<std::string>> gather_lines(C& comm, const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + '\n';
  const std::uint64_t mine = text.size();
  std::vector<std::uint64_t> sizes(static_cast<std::size_t>(comm.size()));
  comm.allgather(std::span<const std::uint64_t>(&mine, 1), std::span<std::uint64_t>(sizes));
  const std::uint64_t longest = *std::max_element(sizes.begin(), sizes.end());
  text.resize(longest, '\0');
  std::string all(longest * sizes.size(), '\0');
  comm.allgather(std::span<const char>(text), std::span<char>(all));
  std::vector<std::vector<std::string>> result;
  for (std::size_t r = 0; r < sizes.size(); ++r) {
    std::vector<std::string>& split = result.emplace_back();
    const std::string_view rank_text(all.data() + r * longest, sizes[r]);
    for (std::size_t begin = 0; begin < rank_text.size();) {
      const std::size_t end = rank_text.find('\n', begin);
      split.emplace_back(rank_text.substr(begin, end - begin));
      begin = end + 1;
    }
  }
  return result;
}

}  // namespace detail

/// Compares this rank's signature with every other rank's; throws signature_error on every
/// rank if any differ. A collective on `comm`: every rank must call it.
template <Communicator C>
void verify_signature(C& comm, const std::vector<std::string>& lines) {
  const auto all = detail::gather_lines(comm, lines);
  const std::vector<std::string>& reference = all[0];
  std::size_t first_difference = SIZE_MAX;
  for (const auto& other : all) {
    const auto mismatch = std::mismatch(reference.begin(), reference.end(), other.begin(), other.end());
    if (mismatch.first != reference.end() || mismatch.second != other.end())
      first_difference = std::min<std::size_t>(first_difference, static_cast<std::size_t>(mismatch.first - reference.begin()));
  }
  if (first_difference == SIZE_MAX) return;
  auto line_of = [&](const std::vector<std::string>& l) {
    return first_difference < l.size() ? l[first_difference] : std::string("nothing (fewer variables)");
  };
  std::vector<int> differing;
  for (std::size_t r = 1; r < all.size(); ++r)
    if (line_of(all[r]) != line_of(reference)) differing.push_back(static_cast<int>(r));
  throw signature_error(fmt::format(
      "the ranks run different models: entry {} of the signature is {} on rank 0 but {} on rank{} {}; every rank must "
      "declare the same variables (names, shapes, strategies) in the same order, with the same strata version",
      first_difference, line_of(reference), line_of(all[static_cast<std::size_t>(differing.front())]),
      differing.size() > 1 ? "s" : "", fmt::join(differing, ", ")));
}

}  // namespace strata
