#pragma once
// Checking outputs before a run: compiled in every translation unit when strata is
// header-only, once under STRATA_SEPARATE_COMPILATION (see config.hpp).
#include <cerrno>
#include <cstring>
#include <system_error>

#include <unistd.h>

#include "strata/detail/outputs.hpp"

namespace strata::detail {

STRATA_DECL std::filesystem::path existing_ancestor(std::filesystem::path p) {
  std::error_code ec;
  if (p.is_relative()) p = std::filesystem::current_path(ec) / p;
  while (!p.empty() && !std::filesystem::exists(p, ec) && p != p.parent_path()) p = p.parent_path();
  return p;
}

STRATA_DECL void require_writable_folder_now(const std::filesystem::path& f, std::string_view what,
                                             const std::filesystem::path& given) {
  std::error_code ec;
  if (!std::filesystem::is_directory(f, ec))
    throw usage_error(std::string(what) + ": " + quoted_path(f) + ", on the way to " + quoted_path(given) +
                      ", is not a folder");
  if (::access(f.c_str(), W_OK | X_OK) != 0)
    throw output_error(std::string(what) + ": cannot write into " + quoted_path(f) + " (" + std::strerror(errno) +
                       "); choose a folder you may write");
}

}  // namespace strata::detail

namespace strata {

STRATA_DECL void require_writable_file(const std::filesystem::path& file, std::string_view what) {
  namespace fs = std::filesystem;
  const std::string text = file.string();
  if (text.empty()) throw usage_error(std::string(what) + ": the path is empty; give a file name");
  if (text.back() == '/')
    throw usage_error(std::string(what) + ": " + detail::quoted_path(file) + " ends with '/', a folder; give a file name");
  std::error_code ec;
  const fs::file_status status = fs::status(file, ec);
  if (fs::is_directory(status))
    throw usage_error(std::string(what) + ": " + detail::quoted_path(file) + " is a folder; give a file name");
  if (fs::exists(status) && !fs::is_regular_file(status))
    throw usage_error(std::string(what) + ": " + detail::quoted_path(file) +
                      " is not a regular file (a device, pipe or socket); give a file name");
  if (fs::exists(status)) {
    if (::access(file.c_str(), W_OK) != 0)
      throw output_error(std::string(what) + ": cannot write " + detail::quoted_path(file) + " (" + std::strerror(errno) +
                         ")");
    return;
  }
  const fs::path parent = file.has_parent_path() ? file.parent_path() : fs::path(".");
  detail::require_writable_folder_now(detail::existing_ancestor(parent), what, file);
}

STRATA_DECL void require_writable_folder(const std::filesystem::path& folder, std::string_view what) {
  namespace fs = std::filesystem;
  if (folder.empty()) throw usage_error(std::string(what) + ": the path is empty; give a folder");
  std::error_code ec;
  if (fs::exists(folder, ec) && !fs::is_directory(folder, ec))
    throw usage_error(std::string(what) + ": " + detail::quoted_path(folder) + " exists and is not a folder");
  detail::require_writable_folder_now(detail::existing_ancestor(folder), what, folder);
}

}  // namespace strata
