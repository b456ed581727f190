#pragma once
// Command lines of the examples and benchmarks, checked at the door: every number is parsed
// strictly and must lie in its flag's range, and a bad value ends the program with exit status
// 64 and one line that names the flag, the value and what is allowed (instead of a core dump,
// a wrapped negative size or a 309-digit limit).
#include <cerrno>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>
#include <algorithm>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <strata/detail/text.hpp>
#include <strata/strategy/canonical_string.hpp>
#include <strata/exit_status.hpp>

namespace examples {

namespace detail {

/// `text` as a T, or why it is not one.
template <class T>
std::optional<std::string> parse_error(const std::string& text, T& value) {
  const std::string quoted = fmt::format("'{}'", strata::detail::excerpt(text, 40));
  if constexpr (std::is_floating_point_v<T>) {
    char* end = nullptr;
    errno = 0;
    const double parsed = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size()) return quoted + " is not a number";
    if (!std::isfinite(parsed) || errno == ERANGE || std::abs(parsed) > static_cast<double>(std::numeric_limits<T>::max()))
      return quoted + " is not a finite number";
    value = static_cast<T>(parsed);
  } else {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec == std::errc::result_out_of_range) return quoted + " is too large";
    if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return quoted + " is not a whole number";
  }
  return std::nullopt;
}

}  // namespace detail

/// A validator: the value parses as a T and lies in [low, high].
template <class T>
CLI::Validator in_range(T low, T high) {
  const std::string range = fmt::format("[{}, {}]", low, high);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        T value{};
        if (auto error = detail::parse_error(text, value)) return *error + "; allowed: " + range;
        if (value < low || value > high) return fmt::format("'{}' is outside the allowed range {}", text, range);
        return {};
      },
      range);
}

/// Adds a numeric option whose values must lie in [low, high].
template <class T>
CLI::Option* number(CLI::App& app, const std::string& name, T& value, T low, T high, const std::string& description = "") {
  return app.add_option(name, value, description)->check(in_range<T>(low, high));
}

/// Adds an option taking "true" or "false" (or 1, 0).
inline CLI::Option* boolean(CLI::App& app, const std::string& name, bool& value, const std::string& description = "") {
  return app.add_option(name, value, description)
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            if (text == "true" || text == "false" || text == "1" || text == "0") return {};
            return fmt::format("'{}' is not true or false", strata::detail::excerpt(text, 40));
          },
          "true|false"));
}

/// Adds an option that takes one of `choices`.
inline CLI::Option* one_of(CLI::App& app, const std::string& name, std::string& value, std::vector<std::string> choices,
                           const std::string& description) {
  return app.add_option(name, value, description)
      ->check(CLI::Validator(
          [choices](std::string& text) -> std::string {
            if (std::ranges::find(choices, text) != choices.end()) return {};
            return fmt::format("'{}' is not one of {}", strata::detail::excerpt(text, 40), fmt::join(choices, ", "));
          },
          fmt::format("{{{}}}", fmt::join(choices, ","))));
}

/// Adds an option taking a strategy string, checked by strata's parser (whose message says
/// which column is wrong and what was expected there); with `accept_auto`, also "auto" (the
/// cost model chooses).
inline CLI::Option* strategy(CLI::App& app, const std::string& name, std::string& value, const std::string& description,
                             bool accept_auto = false) {
  return app.add_option(name, value, description)
      ->check(CLI::Validator(
          [accept_auto](std::string& text) -> std::string {
            if (accept_auto && text == "auto") return {};
            try {
              strata::parse_strategy(text);
              return {};
            } catch (const std::invalid_argument& e) {
              return e.what();
            }
          },
          "STRATEGY"));
}

/// Parses the command line (on every rank: each needs the values). On a parse error rank 0
/// alone prints one line naming the program, the flag, the value and what is allowed, so it
/// appears once; returns the exit status to end with (0 after --help), or nullopt to go on.
inline std::optional<int> parse(CLI::App& app, int argc, char** argv, std::string_view program, int rank = 0) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return rank == 0 ? app.exit(e) : 0;  // --help
    if (rank == 0) fmt::print(stderr, "{}: {} (see --help)\n", program, e.what());
    return strata::exit_usage;
  }
  return std::nullopt;
}

/// A usage error found after parsing (flags that contradict each other, a value the data
/// cannot meet): thrown from run(), it ends the program with exit status 64.
inline strata::usage_error flag_error(std::string_view flag, std::string_view what) {
  return strata::usage_error(fmt::format("{}: {}", flag, what));
}

}  // namespace examples
