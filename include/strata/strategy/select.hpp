#pragma once
// Choosing among compiled strategies at run time, e.g. from a command-line flag: the string
// is parsed, and the one candidate type with the same descriptor is handed to the caller.
#include <string>
#include <string_view>
#include <type_traits>

#include "strata/strategy/canonical_string.hpp"

namespace strata {

/// Calls `f(std::type_identity<S>{})` for the candidate `S` that `text` names.
/// Throws strategy_parse_error for a malformed string and std::invalid_argument, listing
/// the candidates, for a valid strategy that was not compiled in.
template <CanonicalStrategy... Candidates, class F>
void visit_strategy(std::string_view text, F&& f) {
  const strategy_descriptor wanted = parse_strategy(text);
  const bool found = ((Candidates::descriptor == wanted ? (f(std::type_identity<Candidates>{}), true) : false) || ...);
  if (!found) {
    std::string known;
    ((known += (known.empty() ? "" : ", ") + strategy_name<Candidates>()), ...);
    throw std::invalid_argument(fmt::format("strategy \"{}\" ({}) is not among the strategies this program was compiled with: {}",
                                            text, to_string(wanted), known));
  }
}

}  // namespace strata
