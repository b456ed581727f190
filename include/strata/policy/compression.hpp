#pragma once
#include <type_traits>

#include "strata/policy/category.hpp"

namespace strata {

/// Codecs: what a gradient looks like on the wire.
struct None { static constexpr bool is_codec = true; };
struct FP16 { static constexpr bool is_codec = true; };
struct BF16 { static constexpr bool is_codec = true; };

/// Each rank sends its `Ratio` largest-magnitude entries (indices and values).
template <double Ratio>
struct TopK {
  static_assert(Ratio > 0.0 && Ratio <= 1.0, "TopK<Ratio>: Ratio is the kept fraction and must lie in (0, 1]");
  static constexpr bool arguments_accepted = Ratio > 0.0 && Ratio <= 1.0;
  static constexpr bool is_codec = true;
  static constexpr double ratio = Ratio;
};

/// Low-rank P/Q factorization of each 2-D gradient with rank `Rank`.
template <int Rank>
struct PowerSGD {
  static_assert(Rank >= 1, "PowerSGD<Rank>: Rank must be at least 1");
  static constexpr bool arguments_accepted = Rank >= 1;
  static constexpr bool is_codec = true;
  static constexpr int rank = Rank;
};

template <class C>
concept Codec = requires { requires C::is_codec; };

/// Error feedback: the part of a gradient a lossy codec dropped is added back next step.
struct ErrorFeedback { static constexpr bool is_feedback = true; static constexpr bool enabled = true; };
struct NoFeedback    { static constexpr bool is_feedback = true; static constexpr bool enabled = false; };

template <class F>
concept FeedbackPolicy = requires { requires F::is_feedback; };
template <class F>
concept EnabledFeedback = FeedbackPolicy<F> && requires { requires F::enabled; };

template <class Codec, class Feedback = NoFeedback>
struct Compress {
  static_assert(strata::Codec<Codec>, "Compress<Codec>: Codec must be one of None, FP16, BF16, TopK<Ratio>, PowerSGD<Rank>");
  static_assert(FeedbackPolicy<Feedback>, "Compress<Codec, Feedback>: Feedback must be ErrorFeedback or NoFeedback");
  static_assert(!(std::is_same_v<Codec, None> && EnabledFeedback<Feedback>),
                "Compress<None, ErrorFeedback>: an uncompressed gradient loses nothing to feed back");
  static constexpr bool arguments_accepted = strata::Codec<Codec> && FeedbackPolicy<Feedback> &&
                                             arguments_accepted_of<Codec> &&
                                             !(std::is_same_v<Codec, None> && EnabledFeedback<Feedback>);
  using policy_category = category::compression;
  using codec = Codec;
  using feedback = Feedback;
};

}  // namespace strata
