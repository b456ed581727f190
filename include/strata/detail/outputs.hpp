#pragma once
// What a run will write, checked before its first step: a file or folder given for output
// must be of the right kind and writable now, not found unwritable after hours of training.
// Standard C++ and POSIX only (no fmt), so every program can use it.
#include <filesystem>
#include <string>
#include <string_view>

#include "strata/config.hpp"
#include "strata/error.hpp"

namespace strata {

namespace detail {

inline std::string quoted_path(const std::filesystem::path& p) { return "\"" + p.string() + "\""; }

/// The nearest folder at or above `p` that exists (where a missing one would be made).
STRATA_DECL std::filesystem::path existing_ancestor(std::filesystem::path p);

/// Throws output_error unless this process may create entries in folder `f`.
STRATA_DECL void require_writable_folder_now(const std::filesystem::path& f, std::string_view what,
                                             const std::filesystem::path& given);

}  // namespace detail

/// Checks, before a run, that `file` (given as `what`, e.g. "--save-params") can be written:
/// a file name, not a folder or a device; its folder (or the nearest that exists, where the
/// rest would be made) writable. Throws usage_error for the wrong kind of path, output_error
/// where the file system refuses.
STRATA_DECL void require_writable_file(const std::filesystem::path& file, std::string_view what);

/// Checks, before a run, that folder `folder` (given as `what`, e.g. "--checkpoint-dir") can
/// be written into: a folder if it exists, else the nearest existing folder above it, where
/// it would be made. Throws as require_writable_file does.
STRATA_DECL void require_writable_folder(const std::filesystem::path& folder, std::string_view what);

}  // namespace strata

#if defined(STRATA_HEADER_ONLY)
#include "strata/detail/impl/outputs.ipp"
#endif
