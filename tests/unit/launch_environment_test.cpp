// Reading where a rank stands from its launcher's environment (torchrun, Slurm, OpenMPI),
// and which GPU it takes: the pieces of a start without MPI that need no GPU.
#include <map>
#include <optional>
#include <string>

#include <catch2/catch.hpp>

#include "strata/comm/launch_environment.hpp"

using namespace strata;

namespace {

/// A launcher's environment, as read_launch_environment reads one.
struct environment {
  std::map<std::string, std::string> variables;
  const char* operator()(const char* name) const {
    const auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  }
};

std::optional<launch_environment> launched_with(std::map<std::string, std::string> variables) {
  return read_launch_environment(environment{std::move(variables)});
}

}  // namespace

TEST_CASE("torchrun's variables place the rank; rank 0 listens on MASTER_PORT + 1", "[launch]") {
  const auto e = launched_with({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                       {"MASTER_ADDR", "198.18.0.1"}, {"MASTER_PORT", "29500"}});
  REQUIRE(e);
  CHECK(e->by == launcher::torchrun);
  CHECK((e->rank == 3 && e->size == 8 && e->local_rank == 1 && e->local_size == 2));
  CHECK(e->address == "198.18.0.1:29501");
}

TEST_CASE("Slurm's and OpenMPI's variables place the rank; NCCL_COMM_ID names the address itself", "[launch]") {
  const auto slurm = launched_with({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}, {"SLURM_LOCALID", "2"}, {"NCCL_COMM_ID", "node0:4000"}});
  REQUIRE(slurm);
  CHECK(slurm->by == launcher::slurm);
  CHECK((slurm->rank == 5 && slurm->size == 6 && slurm->local_rank == 2 && slurm->local_size == 0));
  CHECK(slurm->address == "node0:4000");
  const auto ompi = launched_with({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  REQUIRE(ompi);
  CHECK(ompi->by == launcher::openmpi);
  CHECK((ompi->rank == 1 && ompi->local_size == 2 && ompi->address.empty()));
}

TEST_CASE("torchrun's variables win over the launcher that started torchrun; none set is a process alone", "[launch]") {
  const auto e = launched_with({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"SLURM_PROCID", "1"},
                       {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"}});
  REQUIRE(e);
  CHECK((e->by == launcher::torchrun && e->size == 2));
  CHECK_FALSE(launched_with({{"HOME", "/root"}}));
}

TEST_CASE("a missing, malformed or out-of-range variable is refused by name", "[launch][errors]") {
  CHECK_THROWS_WITH(launched_with({{"RANK", "0"}, {"LOCAL_RANK", "0"}}),
                    Catch::Contains("RANK is set (torchrun) but WORLD_SIZE is not"));
  CHECK_THROWS_WITH(launched_with({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1x"}}),
                    Catch::Contains("LOCAL_RANK=\"1x\" (torchrun): this rank among the ranks of its machine must be a "
                                    "whole number, at least 0"));
  CHECK_THROWS_WITH(launched_with({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}}),
                    Catch::Contains("SLURM_PROCID=4 but SLURM_NTASKS=4 (Slurm): a rank must be below the number of ranks"));
  CHECK_THROWS_WITH(launched_with({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "0"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}}),
                    Catch::Contains("OMPI_COMM_WORLD_SIZE=\"0\" (OpenMPI): the number of ranks must be a whole number, at "
                                    "least 1"));
  CHECK_THROWS_WITH(launched_with({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "h"}}),
                    Catch::Contains("MASTER_ADDR is set but MASTER_PORT is not"));
  CHECK_THROWS_WITH(launched_with({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "h"},
                          {"MASTER_PORT", "65535"}}),
                    Catch::Contains("MASTER_PORT=\"65535\": a port from 1 to 65534"));
}

TEST_CASE("a rank takes the GPU of its local rank, or the one GPU it sees", "[launch]") {
  CHECK(device_of_local_rank(0, 8) == 0);
  CHECK(device_of_local_rank(3, 8) == 3);
  CHECK(device_of_local_rank(1, 1) == 0);  // Slurm's --gpus-per-task=1: each rank sees its own GPU as GPU 0
  CHECK(device_of_local_rank(5, 1) == 0);
  CHECK_FALSE(device_of_local_rank(2, 2));  // fewer GPUs than ranks, but more than one
  CHECK_FALSE(device_of_local_rank(0, 0));
}
