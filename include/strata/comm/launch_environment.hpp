#pragma once
// Where a rank stands in its job, read from the environment its launcher set, so that a job
// can start without MPI: torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT), Slurm's srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) and
// OpenMPI's mpirun (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK,
// _LOCAL_SIZE). And which GPU a rank takes, from its local rank and the GPUs it sees.
#include <charconv>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include <fmt/format.h>

#include "strata/error.hpp"

namespace strata {

enum class launcher { torchrun, slurm, openmpi };

inline std::string_view to_string(launcher l) {
  return l == launcher::torchrun ? "torchrun" : l == launcher::slurm ? "Slurm" : "OpenMPI";
}

/// A rank's place in its job, as its launcher said it.
struct launch_environment {
  launcher by = launcher::torchrun;
  int rank = 0, size = 1;
  int local_rank = 0;
  int local_size = 0;  ///< ranks on this machine; 0 where the launcher does not say
  /// Where rank 0 listens for the others (NCCL's bootstrap): NCCL_COMM_ID ("host:port") if
  /// set, else MASTER_ADDR and MASTER_PORT + 1 (torchrun's own store holds MASTER_PORT);
  /// empty where neither is set.
  std::string address;
};

namespace detail {

/// The names of one launcher's variables, in the order rank, size, local rank, local size.
struct launcher_variables {
  launcher by;
  std::string_view rank, size, local_rank, local_size;
};

/// `text` as a whole number from `least` to `most`, or nullopt.
inline std::optional<int> whole_number(std::string_view text, int least, int most) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < least || value > most) return std::nullopt;
  return value;
}

inline constexpr launcher_variables launchers[] = {
    {launcher::torchrun, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {launcher::slurm, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", ""},
    {launcher::openmpi, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
};

}  // namespace detail

/// Reads the launcher's variables through `get` (a name to a value, or nullptr where unset:
/// std::getenv by default). The first launcher whose rank variable is set wins, in the order
/// torchrun, Slurm, OpenMPI; nullopt where none is (a process started alone). A missing,
/// malformed or out-of-range variable is refused (usage_error), naming it and its launcher.
template <class Get>
std::optional<launch_environment> read_launch_environment(Get&& get) {
  for (const detail::launcher_variables& v : detail::launchers) {
    if (!get(std::string(v.rank).c_str())) continue;
    const auto number = [&](std::string_view name, int least, std::string_view meaning) {
      const char* text = get(std::string(name).c_str());
      if (!text)
        throw usage_error(fmt::format("{} is set ({}) but {} is not: {} sets both; set {} to {}", v.rank, to_string(v.by),
                                      name, to_string(v.by), name, meaning));
      const std::optional<int> value = detail::whole_number(text, least, std::numeric_limits<int>::max());
      if (!value)
        throw usage_error(fmt::format("{}=\"{}\" ({}): {} must be a whole number, at least {}", name, text,
                                      to_string(v.by), meaning, least));
      return *value;
    };
    launch_environment e;
    e.by = v.by;
    e.size = number(v.size, 1, "the number of ranks");
    e.rank = number(v.rank, 0, "this rank");
    e.local_rank = number(v.local_rank, 0, "this rank among the ranks of its machine");
    if (!v.local_size.empty() && get(std::string(v.local_size).c_str()))
      e.local_size = number(v.local_size, 1, "the number of ranks on this machine");
    if (e.rank >= e.size)
      throw usage_error(fmt::format("{}={} but {}={} ({}): a rank must be below the number of ranks", v.rank, e.rank, v.size,
                                    e.size, to_string(v.by)));
    if (e.local_size > 0 && e.local_rank >= e.local_size)
      throw usage_error(fmt::format("{}={} but {}={} ({}): a local rank must be below the ranks of its machine",
                                    v.local_rank, e.local_rank, v.local_size, e.local_size, to_string(v.by)));
    if (const char* id = get("NCCL_COMM_ID")) {
      e.address = id;
    } else if (const char* host = get("MASTER_ADDR")) {
      const char* port_text = get("MASTER_PORT");
      if (!port_text)
        throw usage_error("MASTER_ADDR is set but MASTER_PORT is not: set both (rank 0 listens on MASTER_PORT + 1), or "
                          "NCCL_COMM_ID=host:port");
      const std::optional<int> port = detail::whole_number(port_text, 1, 65534);
      if (!port)
        throw usage_error(
            fmt::format("MASTER_PORT=\"{}\": a port from 1 to 65534 (rank 0 listens on MASTER_PORT + 1)", port_text));
      e.address = fmt::format("{}:{}", host, *port + 1);
    }
    return e;
  }
  return std::nullopt;
}

/// The same from this process's environment.
inline std::optional<launch_environment> read_launch_environment() {
  return read_launch_environment([](const char* name) -> const char* { return std::getenv(name); });
}

/// The GPU that local rank `local_rank` takes when it sees `devices` GPUs: GPU `local_rank`
/// where each rank of the machine sees all of them; GPU 0 where it sees one (Slurm's
/// --gpus-per-task=1 or CUDA_VISIBLE_DEVICES set per rank give each rank its own, and NCCL
/// from 2.30 lets ranks share one with NCCL_MULTI_RANK_GPU_ENABLE=1); nullopt where neither
/// holds (fewer GPUs than ranks, but more than one).
inline std::optional<int> device_of_local_rank(int local_rank, int devices) {
  if (local_rank < devices) return local_rank;
  if (devices == 1) return 0;
  return std::nullopt;
}

}  // namespace strata
