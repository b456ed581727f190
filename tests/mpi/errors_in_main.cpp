// Jobs that end in an exception under strata::run_main, for the one-line-per-job tests:
//   errors_in_main every-rank   every rank throws the same usage error (rank 0 says it)
//   errors_in_main one-rank     rank 1 alone throws; rank 0 waits in a barrier (rank 1 says it)
//   errors_in_main other-kinds  rank 0 meets a usage error, the others a failure worth a restart
//                               (each says its own)
#include <stdexcept>
#include <string_view>

#include <strata/error.hpp>
#include <strata/main.hpp>

int main(int argc, char** argv) {
  const std::string_view which = argc > 1 ? argv[1] : "";
  return strata::run_main(argc, argv, [&](strata::mpi::context& ctx) {
    if (which == "every-rank") throw strata::usage_error("the same mistake on every rank");
    if (which == "one-rank") {
      if (ctx.rank() == 1) throw strata::usage_error("a mistake on rank 1 alone");
      ctx.control().barrier();  // never passed: the job ends when rank 1 does
    }
    if (which == "other-kinds") {
      if (ctx.rank() == 0) throw strata::usage_error("a usage error on rank 0");
      throw std::runtime_error("a failure on another rank");
    }
    return 0;
  });
}
