#pragma once
// Comparing signatures: compiled in every translation unit when strata is header-only, once
// under STRATA_SEPARATE_COMPILATION (see config.hpp).
#include <algorithm>
#include <cstdint>

#include "strata/exec/signature_check.hpp"

namespace strata::detail {

STRATA_DECL std::string join_lines(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + '\n';
  return text;
}

STRATA_DECL std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  for (std::size_t begin = 0; begin < text.size();) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    lines.emplace_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

}  // namespace strata::detail

namespace strata {

STRATA_DECL void check_signatures(const std::vector<std::vector<std::string>>& all) {
  const std::vector<std::string>& reference = all.at(0);
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
  std::string differing;
  std::size_t count = 0, first = 0;
  for (std::size_t r = 1; r < all.size(); ++r)
    if (line_of(all[r]) != line_of(reference)) {
      differing += (count == 0 ? "" : ", ") + std::to_string(r);
      if (count++ == 0) first = r;
    }
  constexpr std::string_view setting = "setting ";
  const std::string& mine = line_of(reference);
  if (mine.starts_with(setting) && line_of(all[first]).starts_with(setting)) {
    const std::size_t equals = mine.find(" = ");
    const std::string name = mine.substr(setting.size(), equals - setting.size());
    const std::string theirs = line_of(all[first]);
    if (theirs.starts_with(mine.substr(0, equals + 3)))
      throw signature_error("the ranks disagree on setting " + name + ": " + mine.substr(equals + 3) + " on rank 0 but " +
                            theirs.substr(equals + 3) + " on rank" + (count > 1 ? "s " : " ") + differing +
                            "; start every rank with the same options (they change what crosses the wire or what "
                            "the replicas compute)");
  }
  throw signature_error("the ranks run different models: entry " + std::to_string(first_difference) +
                        " of the signature is " + line_of(reference) + " on rank 0 but " + line_of(all[first]) +
                        " on rank" + (count > 1 ? "s " : " ") + differing +
                        "; every rank must declare the same variables (names, shapes, strategies) in the same order, "
                        "with the same strata version");
}

}  // namespace strata
