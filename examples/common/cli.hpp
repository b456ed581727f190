#pragma once
// Command lines of the examples and benchmarks, checked at the door: every number is parsed
// strictly and must lie in its flag's range, and a bad value ends the program with exit status
// 64 and one line that names the flag, the value and what is allowed (instead of a core dump,
// a wrapped negative size or a 309-digit limit). The numbers and the parse itself are in
// cli_numbers.hpp (no fmt: the GPU-only build has none); the choices and strategies here.
#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <strata/detail/text.hpp>
#include <strata/strategy/canonical_string.hpp>
#include <strata/exit_status.hpp>

#include "cli_numbers.hpp"

namespace examples {

static_assert(exit_usage == strata::exit_usage);

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

/// Refuses `flags` given on a command line where only `needed` uses them: a flag silently
/// ignored hides a mistake (a calibration given, a strategy that never reads it).
inline void refuse_unused(const CLI::App& app, std::initializer_list<std::string> flags, std::string_view needed) {
  for (const std::string& flag : flags)
    if (app.count(flag) > 0)
      throw strata::usage_error(fmt::format("{} is used only with {}; drop it, or add {}", flag, needed, needed));
}

/// A usage error found after parsing (flags that contradict each other, a value the data
/// cannot meet): thrown from run(), it ends the program with exit status 64.
inline strata::usage_error flag_error(std::string_view flag, std::string_view what) {
  return strata::usage_error(fmt::format("{}: {}", flag, what));
}

}  // namespace examples
