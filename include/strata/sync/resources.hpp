#pragma once
// What an executor hands each of its synchronizers: the model's variables, the
// communicators, the communication thread, the optimizer and the options.
#include <chrono>
#include <span>

#include "strata/comm/communicator.hpp"
#include "strata/model/variable.hpp"
#include "strata/sync/allreduce/algorithm.hpp"
#include "strata/sync/bucket_plan.hpp"
#include "strata/sync/comm_thread.hpp"
#include "strata/sync/compress/bucket.hpp"

namespace strata::sync {

namespace ps {
template <Communicator C, class O>
class service;
}

struct dense_allreduce_options {
  bucket_options buckets;
  allreduce_options allreduce;
  compression_options compression;
};

template <Communicator C, class O>
struct synchronizer_resources {
  std::span<const variable_binding> model_variables;  // all of the model's, in declaration order
  C& collectives;
  comm_thread& thread;
  const O& optimizer;  // the executor's, as the user last set it
  dense_allreduce_options dense;
  std::chrono::duration<double> timeout{300.0};  // the executor's: how long a wait may take
  ps::service<C, O>* parameter_server = nullptr;  // the model has no PS variables: none
};

}  // namespace strata::sync
