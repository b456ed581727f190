#pragma once
#include <algorithm>
#include <cstddef>

namespace strata::detail {

/// A string usable as a template argument, so a diagnostic's sentence can live in the
/// failing expression itself (compilers print that expression verbatim).
template <std::size_t N>
struct fixed_string {
  char text[N]{};
  consteval fixed_string(const char (&s)[N]) { std::copy_n(s, N, text); }
};

/// Always false; used as `(condition || unsatisfied<"why">())` inside a concept so that
/// the compiler's "evaluated to false" note carries the explanation.
template <fixed_string Message>
consteval bool unsatisfied() { return false; }

}  // namespace strata::detail
