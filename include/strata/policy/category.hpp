#pragma once
// Every strata policy is an empty tag type that names its category; Strategy<...> sorts
// policies by category, so the order a user writes them in does not matter.
#include <string_view>

namespace strata::category {
struct placement   { static constexpr std::string_view name = "placement"; };
struct partition   { static constexpr std::string_view name = "partition"; };
struct collective  { static constexpr std::string_view name = "collective"; };
struct compression { static constexpr std::string_view name = "compression"; };
struct consistency { static constexpr std::string_view name = "consistency"; };
struct gradient    { static constexpr std::string_view name = "gradient"; };
struct tensor      { static constexpr std::string_view name = "tensor"; };
}  // namespace strata::category

namespace strata {

/// A type is a policy when it names one of the seven categories.
template <class P>
concept Policy = requires { typename P::policy_category; };

template <Policy P>
using category_of = typename P::policy_category;

/// False for a policy (or a policy's argument, such as SSP<S>) that refused its arguments in
/// its own static_assert: a strategy stops there rather than describe it, which would bury
/// that one error under others.
template <class P>
inline constexpr bool arguments_accepted_of = [] {
  if constexpr (requires { P::arguments_accepted; })
    return bool(P::arguments_accepted);
  else
    return true;
}();

}  // namespace strata
