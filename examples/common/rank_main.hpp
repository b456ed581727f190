#pragma once
// The end of an MPI example's main(), shared: parse the command line on every rank (rank 0
// alone prints help and parse errors, so they appear once), then run the program, turning an
// exception into one line naming the program and the rank, and exit code 1.
#include <exception>
#include <string_view>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <strata/comm/mpi/mpi.hpp>

namespace examples {

template <class F>
int parse_and_run(strata::mpi::context& ctx, CLI::App& app, int argc, char** argv, std::string_view program, F&& run) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return ctx.rank() == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 1);
  }
  try {
    return run();
  } catch (const std::exception& e) {
    fmt::print(stderr, "{} (rank {}): {}\n", program, ctx.rank(), e.what());
    return 1;
  }
}

}  // namespace examples
