#pragma once
// A static_assert in a template that exists only to refuse a use (an unsupported combination,
// the wrong memory space) must depend on the template's arguments, or it fires for every
// program; always_false<Args...> is false and depends on them.

namespace strata::detail {

template <class...>
inline constexpr bool always_false = false;

}  // namespace strata::detail
