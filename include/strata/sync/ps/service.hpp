#pragma once
// An executor's parameter server: the plan, this rank's server thread and its client. One
// per executor, shared by every PS synchronizer, so that shards of all PS variables are
// balanced together and one client routes all replies.
#include <memory>
#include <mutex>
#include <set>
#include <span>

#include <fmt/format.h>

#include "strata/comm/communicator.hpp"
#include "strata/error.hpp"
#include "strata/sync/ps/client.hpp"
#include "strata/sync/ps/plan.hpp"
#include "strata/sync/ps/server.hpp"

namespace strata::sync::ps {

/// Claims a communicator for one service while it lives. Two services on one communicator
/// would take each other's messages (they share its tags), and the second one's shutdown
/// would wait forever, so the second is refused at construction instead.
class communicator_claim {
 public:
  communicator_claim(const void* comm, int rank) : comm_(comm) {
    std::lock_guard lock(mutex());
    if (!claimed().insert(comm).second)
      throw usage_error(fmt::format(
          "rank {}: another executor with parameter-server variables is alive on this context; its servers would "
          "receive this one's messages. Destroy it first (one PS executor per context at a time)",
          rank));
  }
  ~communicator_claim() {
    std::lock_guard lock(mutex());
    claimed().erase(comm_);
  }
  communicator_claim(const communicator_claim&) = delete;
  communicator_claim& operator=(const communicator_claim&) = delete;

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::set<const void*>& claimed() {
    static std::set<const void*> s;
    return s;
  }
  const void* comm_;
};

template <Communicator C, class O>
class service {
  static_assert(RowOptimizer<O>, "parameter-server variables need an optimizer that updates rows (RowOptimizer), "
                                 "such as optim::sgd, optim::adam or optim::adagrad");

 public:
  service(C& comm, std::span<const variable_binding> variables, server_assignment servers)
      : claim_(&comm, comm.rank()), comm_(&comm), plan_(make_plan(variables, comm.size(), servers)), client_(comm, plan_) {}
  service(const service&) = delete;
  service& operator=(const service&) = delete;

  /// Starts this rank's server with the bindings' current values (after the start-up
  /// broadcast, equal on every rank).
  void start(const O& optimizer) {
    server_ = std::make_unique<server<C, O>>(*comm_, plan_, optimizer);
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
  communicator_claim claim_;
  C* comm_;
  plan plan_;
  client<C, O> client_;
  std::unique_ptr<server<C, O>> server_;
};

}  // namespace strata::sync::ps
