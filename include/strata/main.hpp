#pragma once
// A training program's main(), in one line: start MPI, run the job, and end an exception with
// one line naming the program and the rank, and the exit status that tells a launcher whether
// a restart can help (exit_status.hpp).
//
//   int main(int argc, char** argv) {
//     return strata::run_main(argc, argv, [](strata::mpi::context& ctx) {
//       ...                 // build the model and the executor, train
//       return 0;           // or a status of exit_status.hpp
//     });
//   }
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "strata/comm/mpi/mpi.hpp"
#include "strata/exit_status.hpp"

namespace strata {

/// How run_main names a job in its messages.
struct job_description {
  std::string program;                ///< empty: the file name of argv[0]
  std::function<std::string()> asked;  ///< what the job was asked for, said when it runs out of memory
};

/// The file name of a path: what a program is called in its messages.
inline std::string_view program_name_of(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

namespace detail {

/// The status of the error rank 0 said it reported, if it says so within `grace`.
inline std::optional<int> reported_by_rank_zero(mpi::communicator& reports, std::chrono::milliseconds grace) {
  const auto until = std::chrono::steady_clock::now() + grace;
  do {
    if (reports.iprobe(0, 0)) {
      std::byte reported{};
      auto request = reports.irecv(std::span<std::byte>(&reported, 1), 0, 0);
      reports.wait(request);
      return std::to_integer<int>(reported);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  } while (std::chrono::steady_clock::now() < until);
  return std::nullopt;
}

}  // namespace detail

/// Starts MPI, runs `job(context)` and returns its status. An exception that leaves `job` ends
/// the program with one line, `<program> (rank <r>): <what>`, and the status exit_status_of
/// gives it: one line per job. Rank 0 says its error and tells the other ranks; a rank that
/// met an error of the same status stays silent, one that met another says its own. A rank
/// whose rank 0 did not fail within a second says its error and ends the job (MPI_Abort with
/// that status). An exception from starting MPI is said by every rank. Running out of memory
/// is a usage error: a restart would ask for the same again.
template <class Job>
int run_main(int& argc, char**& argv, Job&& job, job_description description = {}) {
  if (description.program.empty()) description.program = program_name_of(argc > 0 ? argv[0] : "strata");
  std::optional<mpi::context> ctx;
  std::optional<mpi::communicator> reports;  // rank 0's word that it reported an error
  try {
    ctx.emplace(argc, argv);
    reports.emplace(ctx->control().split(0, ctx->rank()));
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: {}\n", description.program, e.what());
    return exit_status_of(e);
  }
  const auto end = [&](exit_status status, std::string_view what) {
    if (ctx->rank() == 0) {
      const auto said = static_cast<std::byte>(status);  // statuses are below 256
      // After a failed MPI call, nothing more is sent: the context ends the job (MPI_Abort).
      for (int r = 1; r < ctx->size() && !mpi::failed_call(); ++r) {
        auto request = reports->isend(std::span<const std::byte>(&said, 1), r, 0);
        reports->wait(request);  // a small message: sent eagerly, whether or not rank r receives it
      }
      fmt::print(stderr, "{} (rank {}): {}\n", description.program, ctx->rank(), what);
      return status;
    }
    const std::optional<int> reported =
        mpi::failed_call() ? std::nullopt : detail::reported_by_rank_zero(*reports, std::chrono::seconds(1));
    if (reported == static_cast<int>(status)) return status;
    fmt::print(stderr, "{} (rank {}): {}\n", description.program, ctx->rank(), what);
    if (reported) return status;
    // Rank 0 goes on without this rank: ending the job now spares the others their wait for
    // it until a deadline (or, outside strata's collectives, forever).
    ctx->abort(status);
  };
  try {
    return std::invoke(job, *ctx);
  } catch (const std::bad_alloc&) {
    return end(exit_usage, fmt::format("out of memory with {}; ask for less (smaller sizes, batches or fewer ranks per "
                                       "machine)", description.asked ? description.asked() : std::string("its inputs")));
  } catch (const std::exception& e) {
    return end(exit_status_of(e), e.what());
  }
}

}  // namespace strata
