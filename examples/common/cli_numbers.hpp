#pragma once
// Numeric flags checked at the door, and the parse that ends a bad command line with exit
// status 64 and one line naming the flag, the value and what is allowed. Standard C++ and
// CLI11 only, so that every program can use it, the GPU-only build's included.
//
// STRATA_CHECK_FLAGS=1 in the environment makes parse() end the program (status 0) once the
// command line is found good, before anything runs: a launcher, or a test of every flag's
// range (tests/cli/every_flag.py), can check a command line without starting a job.
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include <CLI/CLI.hpp>

#include <strata/detail/outputs.hpp>
#include <strata/detail/text.hpp>

namespace examples {

/// The exit status of a usage error (sysexits' EX_USAGE; strata::exit_usage).
inline constexpr int exit_usage = 64;

namespace detail {

/// `value` as the shortest text that reads back as it (as fmt's "{}" prints it).
template <class T>
std::string shortest(T value) {
  std::array<char, 64> text{};
  const auto [end, ec] = std::to_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() ? std::string(text.data(), end) : std::string("?");
}

/// `text` as a T, or why it is not one.
template <class T>
std::optional<std::string> parse_error(const std::string& text, T& value) {
  const std::string quoted = "'" + strata::detail::excerpt(text, 40) + "'";
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
  const std::string range = "[" + detail::shortest(low) + ", " + detail::shortest(high) + "]";
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        T value{};
        if (auto error = detail::parse_error(text, value)) return *error + "; allowed: " + range;
        if (value < low || value > high)
          return "'" + strata::detail::excerpt(text, 40) + "' is outside the allowed range " + range;
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
            return "'" + strata::detail::excerpt(text, 40) + "' is not true or false";
          },
          "true|false"));
}

/// This process's rank as its launcher numbered it (mpirun, srun, a PMI or PMIx launcher), read
/// from the environment before MPI starts; 0 outside a launcher.
inline int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* text = std::getenv(name)) {
      int rank = 0;
      const std::string_view view(text);
      if (std::from_chars(view.data(), view.data() + view.size(), rank).ec == std::errc()) return rank;
    }
  return 0;
}

/// Parses the command line (on every rank: each needs the values), before MPI starts, so that
/// --help and a usage error cost no start-up of the job. On a parse error the launcher's rank 0
/// alone prints one line naming the program, the flag, the value and what is allowed, so it
/// appears once; returns the exit status to end with (0 after --help, or once the line is
/// found good under STRATA_CHECK_FLAGS=1), or nullopt to go on.
inline std::optional<int> parse(CLI::App& app, int argc, char** argv, std::string_view program) {
  const int rank = launcher_rank();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return rank == 0 ? app.exit(e) : 0;  // --help
    if (rank == 0) {
      const std::string line = std::string(program) + ": " + e.what() + " (see --help)\n";
      std::fputs(line.c_str(), stderr);
    }
    return exit_usage;
  }
  if (const char* check = std::getenv("STRATA_CHECK_FLAGS"); check && std::string_view(check) == "1") return 0;
  return std::nullopt;
}

}  // namespace examples
