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

}  // namespace strata
