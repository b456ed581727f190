#pragma once
// Waits within a deadline, for callers that communicate between their own steps: the
// pipeline's messages, the tensor-parallel layers' collectives and the planner's
// measurements. wait_within_deadline polls one request; for a collective, where the backend can
// test a request (MPI, loopback), every rank first tells the others it arrived; a rank that
// has waited half the deadline says whom it waits for (wait_chain.hpp), and past the deadline
// names the ranks that did not arrive, or the rank at the end of their chain, and ends the
// job. A backend that cannot test (NCCL) waits in its own call, which bounds itself.
#include <chrono>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "strata/comm/communicator.hpp"
#include "strata/comm/pacing.hpp"
#include "strata/exec/timeout.hpp"
#include "strata/exec/wait_chain.hpp"

namespace strata {

template <class Group>
using collectives_of = std::remove_reference_t<decltype(std::declval<Group&>().collectives())>;

namespace detail {
inline constexpr int arrival_tag = 0x5441;  // "TA": a rank reached a bounded collective, on the control channel

/// The group's own deadline (a mesh group's), else STRATA_TIMEOUT_SECONDS.
template <class Group>
std::chrono::duration<double> timeout_of(const Group& group) {
  if constexpr (requires { group.timeout(); }) return group.timeout();
  else return default_timeout();
}
}  // namespace detail

/// Polls `done()` until it holds, waiting for job rank `peer`, at most `timeout`: past half of
/// it tells the job whom it waits for (wait_chain.hpp), past all of it calls `give_up()`,
/// which names the rank and ends the job (it must not return).
template <class Group, class Done, class GiveUp>
void wait_within_deadline(Group& group, int peer, std::chrono::duration<double> timeout, Done&& done, GiveUp&& give_up) {
  const auto begun = std::chrono::steady_clock::now();
  const auto deadline = begun + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout);
  wait_notice notice(job_control(group), begun, timeout);
  // Waits between stages and layers are short and on the critical path: pace::critical_path.
  for (backoff idle(pace::critical_path()); !done(); idle.pause()) {
    const auto now = std::chrono::steady_clock::now();
    notice.waiting_for(peer, now);
    if (now > deadline) give_up();
  }
}

/// Runs the collective that `start(collectives)` begins (returning its request) on every rank
/// of `group`, within the group's deadline; `what` names it for the message ("the tensor
/// group's all-reduce of 4096 floats (copy_to_group::backward)").
template <CommContext Group, class Start>
void collective_within_deadline(Group& group, std::string_view what, Start&& start) {
  auto& comm = group.collectives();
  if constexpr (!Testable<collectives_of<Group>>) {
    auto request = start(comm);
    comm.wait(request);
  } else {
    if (comm.size() == 1) {
      auto request = start(comm);
      comm.wait(request);
      return;
    }
    auto& control = group.control();
    const double here = 1.0;
    std::vector<typename std::remove_reference_t<decltype(control)>::request> told;
    for (int r = 0; r < comm.size(); ++r)
      if (r != comm.rank()) told.push_back(control.isend(std::span<const double>(&here, 1), r, detail::arrival_tag));
    const auto timeout = detail::timeout_of(group);
    const auto begun = std::chrono::steady_clock::now();
    const auto deadline = begun + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout);
    wait_notice notice(job_control(group), begun, timeout);
    const auto absent = [&] {
      std::vector<int> ranks;
      for (int r = 0; r < comm.size(); ++r)
        if (r != comm.rank() && !control.iprobe(r, detail::arrival_tag)) ranks.push_back(r);
      return ranks;
    };
    auto request = start(comm);
    for (backoff idle(pace::critical_path()); !comm.test(request); idle.pause()) {
      const auto now = std::chrono::steady_clock::now();
      if (now < begun + (deadline - begun) / 2) continue;
      const std::vector<int> missing = absent();
      if (!missing.empty()) notice.waiting_for(job_rank(group, missing.front()), now);
      if (now > deadline) {
        constexpr bool own_deadline = requires { group.timeout(); };
        const std::string message = fmt::format(
            "strata ({}): no progress for {:.1f} s: in {}; {}. Raise {}STRATA_TIMEOUT_SECONDS if the ranks are only slow",
            describe_job_rank(group, job_rank(group, comm.rank())), timeout.count(), what,
            missing.empty() ? std::string("every rank of the group arrived, so the collective itself is stuck")
                            : blamed_ranks(group, missing, "arrive"),
            own_deadline ? "the mesh's timeout or " : "");
        abort_after_deadline(group, message);
      }
    }
    double arrived = 0;
    for (int r = 0; r < comm.size(); ++r)
      if (r != comm.rank()) {
        auto received = control.irecv(std::span<double>(&arrived, 1), r, detail::arrival_tag);
        control.wait(received);
      }
    for (auto& t : told) control.wait(t);
  }
}

}  // namespace strata
