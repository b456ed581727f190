#pragma once
// The host executor's start-up handshake: every rank must run the same model (names,
// shapes, element type, canonical strategies, in one order) with the same library version
// and world size, or the collectives would pair up unrelated buffers. The signatures are
// gathered over a host communicator and compared by check_signatures (signature_check.hpp);
// a mismatch is reported on every rank, naming the first differing variable and the ranks
// that differ.
#include <span>
#include <string>
#include <vector>

#include "strata/comm/communicator.hpp"
#include "strata/config.hpp"
#include "strata/error.hpp"
#include "strata/exec/signature_check.hpp"
#include "strata/model/variable.hpp"

namespace strata {

/// One line per fact: the library and world, the micro-batches per update (ranks that
/// accumulate differently would pair one rank's update with another's micro-batch), then
/// every variable.
STRATA_DECL std::vector<std::string> model_signature(std::span<const variable_binding> variables, int world_size,
                                                     int micro_batches);

/// Compares this rank's signature with every other rank's; throws signature_error on every
/// rank if any differ. A collective on `comm`: every rank must call it.
template <Communicator C>
void verify_signature(C& comm, const std::vector<std::string>& lines) {
  check_signatures(detail::gather_lines(comm.size(), lines, [&](auto mine, auto all) { comm.allgather(mine, all); }));
}

}  // namespace strata

#if defined(STRATA_HEADER_ONLY)
#include "strata/exec/impl/signature.ipp"
#endif
