#pragma once
// MPI's start-up and the communicators' non-template members: compiled in every translation
// unit when strata is header-only, once under STRATA_SEPARATE_COMPILATION (see config.hpp).
#include <climits>
#include <cstdlib>

#include <fmt/format.h>

#include "strata/comm/mpi/mpi.hpp"

namespace strata::mpi {

STRATA_DECL void detail::throw_failed_call(int code, std::string_view call, int rank) {
  failed_call() = true;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  const std::string where = rank >= 0 ? fmt::format(" on rank {}", rank) : std::string();
  throw comm_error(fmt::format("{} failed{}: {}", call, where, std::string_view(text, static_cast<std::size_t>(length))));
}

STRATA_DECL communicator::communicator(MPI_Comm comm, int node_color) : comm_(comm), node_color_(node_color) {
  check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  int colors[2] = {node_color, -node_color};  // the greatest and the least color
  check(MPI_Allreduce(MPI_IN_PLACE, colors, 2, MPI_INT, MPI_MAX, comm_), "MPI_Allreduce", rank_);
  spans_machines_ = colors[0] != -colors[1];
}

STRATA_DECL int communicator::gathered_bytes(std::size_t bytes, std::size_t mine, std::size_t all, std::string_view call) const {
  if (all != mine * static_cast<std::size_t>(size_))
    throw comm_error(fmt::format("rank {}: {} of {} elements from each of {} ranks into {} elements", rank_, call, mine,
                                 size_, all));
  return count(bytes);
}

STRATA_DECL communicator communicator::split(int color, int key) {
  MPI_Comm c = MPI_COMM_NULL;
  check(MPI_Comm_split(comm_, color, key, &c), "MPI_Comm_split", rank_);
  auto owner = std::shared_ptr<MPI_Comm>(new MPI_Comm(c), free_comm);
  check(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", rank_);
  communicator child(c, node_color_);
  child.owner_ = std::move(owner);
  return child;
}

STRATA_DECL void communicator::free_comm(MPI_Comm* c) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(c);
  delete c;
}

STRATA_DECL void communicator::too_many_elements(std::size_t n) const {
  throw comm_error(fmt::format("rank {}: {} elements exceed MPI's int count; split the buffer", rank_, n));
}

STRATA_DECL context::~context() {
  if (writes_timeline_) trace::write_or_warn();
  if (owns_mpi_ && failed_call()) abort(1);
  for (MPI_Comm& c : owned_) MPI_Comm_free(&c);
  if (owns_mpi_) MPI_Finalize();
}

STRATA_DECL void context::init(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = 0;
  if (initialized) {
    MPI_Query_thread(&provided);
  } else {
    check(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    owns_mpi_ = true;
    // Failures during set-up come back as codes too, instead of aborting the process.
    check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  }
  if (provided < MPI_THREAD_MULTIPLE)
    throw comm_error("this MPI library does not provide MPI_THREAD_MULTIPLE, which strata needs to communicate on a "
                     "background thread; use an MPI built with thread support (OpenMPI: --enable-mpi-thread-multiple)");
  MPI_Comm node = MPI_COMM_NULL;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  owned_.push_back(node);
  check(MPI_Comm_rank(node, &local_rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(node, &local_size_), "MPI_Comm_size");
  const int node_color = first_world_rank(node);
  world_.emplace(dup(MPI_COMM_WORLD), node_color);  // control
  collectives_.emplace(dup(MPI_COMM_WORLD), node_color);
  parameter_server_.emplace(dup(MPI_COMM_WORLD), node_color);
  if (trace::timeline::requested()) {
    world_->barrier();  // every rank's time 0 at once, so that the tracks line up
    trace::timeline::instance().start_from_environment(rank(), size());
    trace::name_thread("training");
    writes_timeline_ = true;
  }
}

STRATA_DECL int context::first_world_rank(MPI_Comm node) {
  int rank = 0;
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  check(MPI_Bcast(&rank, 1, MPI_INT, 0, node), "MPI_Bcast");
  return rank;
}

STRATA_DECL MPI_Comm context::dup(MPI_Comm from) {
  MPI_Comm c = MPI_COMM_NULL;
  check(MPI_Comm_dup(from, &c), "MPI_Comm_dup");
  // Errors come back as return codes, which check() turns into exceptions with context.
  check(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  owned_.push_back(c);
  return c;
}

}  // namespace strata::mpi
