#pragma once
// Cross-rank mismatches: for every setting an executor reads that changes what crosses the
// wire or what the replicas compute, the last rank starts with a different value and every
// rank must refuse to start with a signature_error that names the setting, rank 0's value and
// the differing rank. (Left unchecked, such ranks corrupted the heap, crashed in MPI_Finalize
// or trained replicas that silently differed.)
#include <functional>
#include <string>
#include <vector>

#include "conformance/cases.hpp"

namespace strata::conformance {

/// One setting, and how the differing rank changes it.
struct setting_change {
  std::string name;
  std::function<void(executor_options&, optim::adam&)> change;
};

inline std::vector<setting_change> settings_that_must_agree() {
  using O = executor_options;
  using A = optim::adam;
  return {
      {"accumulation_steps", [](O& o, A&) { o.accumulation_steps = 2; }},
      {"buckets.first_bucket_bytes", [](O& o, A&) { o.buckets.first_bucket_bytes = 128; }},
      {"buckets.bucket_bytes", [](O& o, A&) { o.buckets.bucket_bytes = 4096; }},
      {"allreduce.ring_chunk_bytes", [](O& o, A&) { o.allreduce.ring_chunk_bytes = 1024; }},
      {"allreduce.ring_window", [](O& o, A&) { o.allreduce.ring_window += 1; }},
      {"allreduce.ranks_per_node", [](O& o, A&) { o.allreduce.ranks_per_node = 1; }},
      {"allreduce.cross_node_chunk_bytes", [](O& o, A&) { o.allreduce.cross_node_chunk_bytes = 1024; }},
      {"allreduce.cross_node_window", [](O& o, A&) { o.allreduce.cross_node_window += 1; }},
      {"allreduce.hierarchical_piece_bytes", [](O& o, A&) { o.allreduce.hierarchical_piece_bytes = 0; }},
      {"compression.powersgd_warmup_steps", [](O& o, A&) { o.compression.powersgd_warmup_steps = 7; }},
      {"compression.seed", [](O& o, A&) { o.compression.seed = 99; }},
      {"compression.on_nonfinite", [](O& o, A&) { o.compression.on_nonfinite = sync::nonfinite_policy::skip_step; }},
      {"compression.scan_uncompressed", [](O& o, A&) { o.compression.scan_uncompressed = true; }},
      {"ps_servers", [](O& o, A&) { o.ps_servers = server_assignment::first_server; }},
      {"optimizer.lr", [](O&, A& a) { a.lr = 0.5f; }},
      {"optimizer.beta1", [](O&, A& a) { a.beta1 = 0.8f; }},
      {"optimizer.beta2", [](O&, A& a) { a.beta2 = 0.99f; }},
      {"optimizer.eps", [](O&, A& a) { a.eps = 1e-6f; }},
      {"optimizer.weight_decay", [](O&, A& a) { a.weight_decay = 0.01f; }},
  };
}

/// Every setting in turn: the last rank differs, every rank gets a signature_error naming it.
template <CommContext Context>
void every_differing_setting_is_refused(Context& ctx) {
  using Dense = Strategy<AllReduce<Ring>, Compress<PowerSGD<2>, ErrorFeedback>>;
  using Vector = Strategy<AllReduce<Ring>>;
  using Sharded = Strategy<PS<2>, Partition<0>>;
  const int last = ctx.size() - 1;
  for (const setting_change& setting : settings_that_must_agree()) {
    std::vector<float> w(64), gw(64), b(8), gb(8), s(32), gs(32);
    auto m = make_model(variable<Dense>("fc.weight", w, gw, {8, 8}), variable<Vector>("fc.bias", b, gb, {8}),
                        variable<Sharded>("table", s, gs, {8, 4}));
    executor_options options;
    optim::adam optimizer;
    if (ctx.rank() == last) setting.change(options, optimizer);
    try {
      auto exec = make_executor(ctx, m, optimizer, options);
      expect(false, "rank {}: ranks that differ in {} started", ctx.rank(), setting.name);
    } catch (const signature_error& e) {
      const std::string message = e.what(), rank = std::to_string(last);
      expect(message.find("disagree on setting " + setting.name + ":") != std::string::npos &&
                 message.find("on rank 0 but") != std::string::npos &&
                 message.find("on rank " + rank + ";") != std::string::npos,
             "rank {}: the error about {} does not name the setting and both ranks: {}", ctx.rank(), setting.name, message);
    }
  }
}

}  // namespace strata::conformance
