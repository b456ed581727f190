#pragma once
// The canonical string of a strategy, e.g. "PS<4>,Partition<0>,SSP<3>,SparseRows": the
// transferable form used in logs, strategy files and the cross-rank signature check.
//
// Printing lists categories in a fixed order and omits defaults (the placement is always
// shown). Parsing accepts any order, defaults spelled out, and both the short forms and the
// C++ spellings ("FP16" or "Compress<FP16>", "SSP<3>" or "Consistency<SSP<3>>").
#include <cctype>
#include <charconv>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "strata/config.hpp"
#include "strata/detail/text.hpp"
#include "strata/strategy/rules.hpp"
#include "strata/strategy/strategy.hpp"

namespace strata {

STRATA_DECL std::string to_string(const strategy_descriptor& d);

/// The canonical string of a strategy type.
template <CanonicalStrategy S>
std::string strategy_name() {
  return to_string(S::descriptor);
}

/// A strategy string that is malformed or breaks a rule.
class strategy_parse_error : public std::invalid_argument {
 public:
  strategy_parse_error(std::string_view text, std::size_t column, const std::string& what)
      : std::invalid_argument(fmt::format("strategy \"{}\", column {}: {}", detail::excerpt(text), column + 1, what)), column_(column) {}
  std::size_t column() const { return column_; }

 private:
  std::size_t column_;
};

STRATA_DECL strategy_descriptor parse_strategy(std::string_view text);

}  // namespace strata

#if defined(STRATA_HEADER_ONLY)
#include "strata/strategy/impl/canonical_string.ipp"
#endif
