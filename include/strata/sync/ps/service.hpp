#pragma once
// An executor's parameter server: the plan, this rank's server thread and its client. One
// per executor, shared by every PS synchronizer, so that shards of all PS variables are
// balanced together and one client routes all replies. It splits a communicator of its own
// from the context's parameter-server one (collective, at construction), so that executors
// alive at once on one context never take each other's requests, replies or shutdowns.
#include <memory>
#include <span>

#include "strata/comm/communicator.hpp"
#include "strata/sync/ps/client.hpp"
#include "strata/sync/ps/plan.hpp"
#include "strata/sync/ps/server.hpp"

namespace strata::sync::ps {

template <Communicator C, class O>
class service {
  static_assert(RowOptimizer<O>, "parameter-server variables need an optimizer that updates rows (RowOptimizer), "
                                 "such as optim::sgd, optim::adam or optim::adagrad");

 public:
  service(C& comm, std::span<const variable_binding> variables, server_assignment servers)
      : comm_(comm.split(0, comm.rank())),
        plan_(make_plan(variables, comm_.size(), servers, host_of_each_rank(comm_))),
        client_(comm_, plan_) {}
  service(const service&) = delete;
  service& operator=(const service&) = delete;

  /// Starts this rank's server with the bindings' current values (after the start-up
  /// broadcast, equal on every rank).
  void start(const O& optimizer) {
    server_ = std::make_unique<server<C, O>>(comm_, plan_, optimizer);
    server_->start();
  }

  /// Collective in effect: returns once every rank's worker has finished.
  ~service() {
    if (!server_) return;
    client_.finish();
    server_->join();
  }

  const plan& layout() const { return plan_; }
  /// What this rank's server holds; nothing before start().
  memory_use held() const { return server_ ? server_->held() : memory_use{}; }
  client<C, O>& worker() { return client_; }

  /// The plan's index of the variable the model declared `model_index`-th.
  std::size_t index_of(std::size_t model_index) const {
    for (std::size_t v = 0; v < plan_.variables.size(); ++v)
      if (plan_.variables[v].model_index == model_index) return v;
    throw usage_error("internal: a parameter-server variable missing from the plan");
  }

 private:
  C comm_;  // this service's own: two executors' servers never take each other's messages
  plan plan_;
  client<C, O> client_;
  std::unique_ptr<server<C, O>> server_;
};

}  // namespace strata::sync::ps
