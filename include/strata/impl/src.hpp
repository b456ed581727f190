#pragma once
// strata's non-template code, for STRATA_SEPARATE_COMPILATION (see config.hpp): include this
// header in exactly one source file of a program, compiled with STRATA_SEPARATE_COMPILATION
// defined like every other. CMake: strata_add_compiled_library(<name>) makes that library.
#if !defined(STRATA_SEPARATE_COMPILATION)
#error "strata/impl/src.hpp is for STRATA_SEPARATE_COMPILATION; header-only programs need no compiled part"
#endif

#include "strata/ckpt/impl/exchange.ipp"
#include "strata/ckpt/impl/format.ipp"
#include "strata/ckpt/impl/safetensors.ipp"
#include "strata/ckpt/impl/store.ipp"
#include "strata/comm/mpi/impl/mpi.ipp"
#include "strata/detail/impl/outputs.ipp"
#include "strata/exec/impl/signature.ipp"
#include "strata/exec/impl/signature_check.ipp"
#include "strata/optim/impl/hyper_parameters.ipp"
#include "strata/strategy/impl/canonical_string.ipp"
#include "strata/sync/impl/bucket_plan.ipp"
#include "strata/sync/impl/comm_thread.ipp"
#include "strata/sync/impl/partition.ipp"
#include "strata/trace/impl/timeline.ipp"
