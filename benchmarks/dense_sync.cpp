// Per-step gradient synchronization of ResNet-50 (161 tensors, 25.6 M fp32 parameters):
// strata's bucketed executor against one MPI_Allreduce over a flat buffer of the same size,
// interleaved. The strata contenders' gradients are separate allocations, as a framework's
// tensors are; the "one arena" ones keep them in one strata::tensor_arena instead, where each
// bucket is one range of memory on huge pages.
//
//   mpirun -np 2 ./dense_sync
//
// The strata step marks every gradient ready in backward order and calls step(): packing
// into buckets, the all-reduces, averaging and writing the gradients back are all timed.
// The optimizer is a no-op so that only synchronization is measured, as in
// shared/peers/ddp_sync.py.
//
// The bound is what this machine's memory allows any all-reduce of these bytes, measured in
// the same run: a ring over p ranks must, on every rank at once, bring in (p-1)/p of the bytes
// twice (reduce-scatter, then all-gather: one copy each, however the transport moves them) and
// add (p-1)/p of them into its own. The bound does so a ring chunk at a time, as the ring
// does, so each byte is read from memory once: whole-buffer passes would go to memory between
// the copy and the add, and a ring that keeps its chunks in cache would beat them.
// vs_bound = strata_ms / bound_ms (1.0: nothing but the unavoidable memory traffic).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <strata/strata.hpp>

#include "executor_model.hpp"
#include "measure.hpp"
#include "model_shapes.hpp"
#include "../examples/common/rank_main.hpp"

int main(int argc, char** argv) {
  bool quick = false;
  int rounds = 15;
  double bucket_mib = 25.0, first_bucket_mib = 1.0;
  strata::executor_options options;
  CLI::App app{"ResNet-50 gradient synchronization: strata's bucketed executor vs one flat MPI_Allreduce"};
  app.add_flag("--quick", quick, "few rounds (smoke test)");
  examples::number(app, "--rounds", rounds, 1, 1000, "interleaved rounds (medians are taken over them)");
  examples::number(app, "--bucket-mib", bucket_mib, 0.001, 4096.0, "fusion bucket size");
  examples::number(app, "--first-bucket-mib", first_bucket_mib, 0.001, 4096.0, "first bucket size");
  examples::number(app, "--ring-chunk-bytes", options.allreduce.ring_chunk_bytes, std::size_t{4}, std::size_t{1} << 30,
                   "the ring's chunk as messages");
  examples::number(app, "--shared-chunk-bytes", options.allreduce.shared_memory_chunk_bytes, std::size_t{4},
                   std::size_t{1} << 30, "the ring's chunk through shared memory");
  examples::number(app, "--ring-window", options.allreduce.ring_window, std::size_t{1}, std::size_t{64},
                   "the ring's chunks in flight");
  return examples::parse_and_run(app, argc, argv, "dense_sync", [&](strata::mpi::context& ctx) {
    if (quick) rounds = 2;

    const auto shapes = bench::resnet50_shapes();
    bench::expect_size(shapes, 161, 25'557'032);
    std::size_t total = 0;
    for (const auto& s : shapes) total += s.elements();

    options.buckets = {.first_bucket_bytes = static_cast<std::size_t>(first_bucket_mib * (1 << 20)),
                       .bucket_bytes = static_cast<std::size_t>(bucket_mib * (1 << 20))};
    bench::executor_model<strata::Strategy<strata::AllReduce<strata::Ring>>, bench::no_update> ring(ctx, shapes, {}, options);
    strata::executor_options as_messages = options;  // the same ring, its chunks sent as MPI messages
    as_messages.allreduce.shared_memory_max_bytes = 0;
    bench::executor_model<strata::Strategy<strata::AllReduce<strata::Ring>>, bench::no_update> ring_messages(ctx, shapes, {},
                                                                                                           as_messages);
    bench::executor_model<strata::Strategy<strata::AllReduce<strata::Native>>, bench::no_update> native(ctx, shapes, {},
                                                                                                       options);
    // Rings within each machine and across them (on one machine: a ring over its ranks).
    bench::executor_model<strata::Strategy<strata::AllReduce<strata::Hierarchical>>, bench::no_update> hierarchical(
        ctx, shapes, {}, options);
    // The ring and Native over the same gradients in one allocation, laid out as the buckets fill.
    bench::executor_model<strata::Strategy<strata::AllReduce<strata::Ring>>, bench::no_update> ring_arena(
        ctx, shapes, {}, options, 0.0f, 1.0f, bench::gradient_memory::one_arena);
    bench::executor_model<strata::Strategy<strata::AllReduce<strata::Native>>, bench::no_update> native_arena(
        ctx, shapes, {}, options, 0.0f, 1.0f, bench::gradient_memory::one_arena);
    strata::host_vector<float> flat(total, 1.0f);
    const MPI_Comm comm = ctx.collectives().native_handle();

    // The bound's memory traffic, on this rank's share of the bytes, every rank at once: per
    // chunk, the incoming bytes land in a buffer that stays in cache, are added into this
    // rank's own, and the sum goes out (the all-gather's copy) while it is in cache too.
    const std::size_t share = total / static_cast<std::size_t>(ctx.size()) * static_cast<std::size_t>(ctx.size() - 1);
    strata::host_vector<float> received(total, 1.0f), own(total, 2.0f);
    std::vector<float> landing(options.allreduce.ring_chunk_bytes / sizeof(float));
    auto memory_bound = [&] {
      for (std::size_t at = 0; at < share; at += landing.size()) {
        const std::size_t n = std::min(landing.size(), share - at);
        std::memcpy(landing.data(), flat.data() + at, n * sizeof(float));  // the reduce-scatter's incoming chunk
        float* __restrict sum = own.data() + at;
        const float* __restrict in = landing.data();
        for (std::size_t i = 0; i < n; ++i) sum[i] += in[i];  // ...added into this rank's own
        std::memcpy(received.data() + at, sum, n * sizeof(float));  // the all-gather's copy of the sum
      }
    };

    std::vector<bench::contender> contenders = {
        {"strata ring", [&] { ring.step(); }},
        {"ring as messages", [&] { ring_messages.step(); }},
        {"strata native", [&] { native.step(); }},
        {"strata hierarchical", [&] { hierarchical.step(); }},
        {"flat MPI_Allreduce",
         [&] { MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(total), MPI_FLOAT, MPI_SUM, comm); }},
        {"memory bound", memory_bound},
        {"ring, one arena", [&] { ring_arena.step(); }},
        {"native, one arena", [&] { native_arena.step(); }},
    };
    bench::interleave(contenders, rounds, 1, [&] { MPI_Barrier(comm); });
    auto ms = [&](std::size_t i) { return 1e3 * bench::median(contenders[i].seconds); };
    const double ring_ms = ms(0), messages_ms = ms(1), native_ms = ms(2), hierarchical_ms = ms(3), flat_ms = ms(4),
                 bound_ms = ms(5), arena_ms = ms(6), arena_native_ms = ms(7);
    if (ctx.rank() == 0) {
      fmt::print("ResNet-50: {} tensors, {} parameters, {:.1f} MiB; {} ranks; buckets {} MiB (first {} MiB); medians of {} "
                 "rounds\n",
                 shapes.size(), total, static_cast<double>(total * 4) / (1 << 20), ctx.size(), bucket_mib, first_bucket_mib,
                 rounds);
      for (const auto& c : contenders) fmt::print("  {:<20} {:8.2f} ms\n", c.name, 1e3 * bench::median(c.seconds));
      fmt::print("summary: ranks={} strata_ms={:.2f} strata_native_ms={:.2f} strata_hierarchical_ms={:.2f} "
                 "flat_mpi_ms={:.2f} ratio={:.3f} native_ratio={:.3f} hierarchical_ratio={:.3f} bound_ms={:.2f} "
                 "vs_bound={:.3f} messages_ms={:.2f} shared_vs_messages={:.3f} arena_ms={:.2f} arena_vs_bound={:.3f} "
                 "arena_native_ms={:.2f} (strata = AllReduce<Ring>; ratio = strata_ms / flat_mpi_ms; vs_bound = strata_ms / "
                 "bound_ms; messages: the ring's chunks as MPI messages, not through shared memory; arena: the gradients in "
                 "one tensor_arena)\n",
                 ctx.size(), ring_ms, native_ms, hierarchical_ms, flat_ms, ring_ms / flat_ms, native_ms / flat_ms,
                 hierarchical_ms / flat_ms, bound_ms, ring_ms / bound_ms, messages_ms, ring_ms / messages_ms, arena_ms,
                 arena_ms / bound_ms, arena_native_ms);
    }
    return 0;
  });
}
