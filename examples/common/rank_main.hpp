#pragma once
// The end of an MPI example's main(), shared: parse the command line on every rank (rank 0
// alone prints help and parse errors, so they appear once), then run the program, turning an
// exception into one line naming the program and the rank, and an exit status that tells a
// launcher whether a restart can help (strata/exit_status.hpp).
#include <exception>
#include <optional>
#include <string_view>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <strata/comm/mpi/mpi.hpp>
#include <strata/exit_status.hpp>

#include "cli.hpp"

namespace examples {

/// Parses the command line on every rank. On a parse error rank 0 prints one line naming the
/// program, the flag, the value and what is allowed; returns the exit status to end with
/// (0 after --help), or nullopt to go on.
inline std::optional<int> parse(strata::mpi::context& ctx, CLI::App& app, int argc, char** argv, std::string_view program) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return ctx.rank() == 0 ? app.exit(e) : 0;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return ctx.rank() == 0 ? app.exit(e) : 0;
    if (ctx.rank() == 0) fmt::print(stderr, "{}: {} (see --help)\n", program, e.what());
    return strata::exit_usage;
  }
  return std::nullopt;
}

template <class F>
int parse_and_run(strata::mpi::context& ctx, CLI::App& app, int argc, char** argv, std::string_view program, F&& run) {
  if (const auto status = parse(ctx, app, argc, argv, program)) return *status;
  try {
    return run();
  } catch (const std::exception& e) {
    const strata::exit_status status = strata::exit_status_of(e);
    // A usage error is the same on every rank: said once.
    if (status != strata::exit_usage || ctx.rank() == 0) fmt::print(stderr, "{} (rank {}): {}\n", program, ctx.rank(), e.what());
    return status;
  }
}

}  // namespace examples
