#pragma once
// The end of an MPI example's main(), shared: parse the command line on every rank before MPI
// starts (the launcher's rank 0 alone prints help and parse errors, so they appear once), then
// run the program under strata::run_main (strata/main.hpp).
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <strata/main.hpp>

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

/// Parses the command line, then starts MPI and runs `run(context)` under strata::run_main. A
/// bad command line ends the program before MPI starts; running out of memory names the
/// options given.
template <class F>
int parse_and_run(CLI::App& app, int& argc, char**& argv, std::string_view program, F&& run) {
  if (const auto status = parse(app, argc, argv, program)) return *status;
  return strata::run_main(argc, argv, std::forward<F>(run),
                          {.program = std::string(program), .asked = [&app] { return given_options(app); }});
}

}  // namespace examples
