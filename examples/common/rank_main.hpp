#pragma once
// The end of an MPI example's main(), shared: parse the command line on every rank (rank 0
// alone prints help and parse errors, so they appear once), then run the program, turning an
// exception into one line naming the program and the rank, and an exit status that tells a
// launcher whether a restart can help (strata/exit_status.hpp).
#include <exception>
#include <string_view>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <strata/comm/mpi/mpi.hpp>
#include <strata/exit_status.hpp>

#include "cli.hpp"

namespace examples {

template <class F>
int parse_and_run(strata::mpi::context& ctx, CLI::App& app, int argc, char** argv, std::string_view program, F&& run) {
  if (const auto status = parse(app, argc, argv, program, ctx.rank())) return *status;
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
