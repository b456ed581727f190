#pragma once
// The end of an MPI example's main(), shared: parse the command line on every rank before MPI
// starts (the launcher's rank 0 alone prints help and parse errors, so they appear once), then
// start MPI and run the program, turning an exception into one line naming the program and the
// rank, and an exit status that tells a launcher whether a restart can help
// (strata/exit_status.hpp).
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <strata/comm/mpi/mpi.hpp>
#include <strata/exit_status.hpp>

#include "cli.hpp"

namespace examples {

/// The options given on `app`'s command line, with their values: what a run that ran out
/// of memory was asked for.
inline std::string given_options(const CLI::App& app) {
  std::vector<std::string> given;
  for (const CLI::Option* o : app.get_options())
    if (o->count() > 0 && !o->get_lnames().empty() && !o->results().empty())
      given.push_back(fmt::format("--{} {}", o->get_lnames().front(), fmt::join(o->results(), " ")));
  return given.empty() ? std::string("the defaults") : fmt::format("{}", fmt::join(given, ", "));
}

/// Parses the command line, then starts MPI and runs `run(context)`. A bad command line ends
/// the program before MPI starts; an exception from `run` ends it with one line and the
/// status that tells a launcher whether a restart can help.
template <class F>
int parse_and_run(CLI::App& app, int& argc, char**& argv, std::string_view program, F&& run) {
  if (const auto status = parse(app, argc, argv, program)) return *status;
  strata::mpi::context ctx(argc, argv);
  try {
    return run(ctx);
  } catch (const std::bad_alloc&) {
    // Memory the command line asks for, that this machine does not have: a restart would ask
    // again, so a usage error, naming what was asked.
    fmt::print(stderr, "{} (rank {}): out of memory with {}; ask for less (smaller sizes, batches or fewer ranks per "
               "machine)\n", program, ctx.rank(), given_options(app));
    return strata::exit_usage;
  } catch (const std::exception& e) {
    const strata::exit_status status = strata::exit_status_of(e);
    // A usage error is the same on every rank: said once.
    if (status != strata::exit_usage || ctx.rank() == 0) fmt::print(stderr, "{} (rank {}): {}\n", program, ctx.rank(), e.what());
    return status;
  }
}

}  // namespace examples
