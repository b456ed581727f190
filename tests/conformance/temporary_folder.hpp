#pragma once
// A fresh, empty folder per test (checkpoints), removed afterwards.
#include <atomic>
#include <filesystem>

#include <fmt/format.h>
#include <unistd.h>

namespace strata::conformance {

struct temporary_folder {
  std::filesystem::path path;
  temporary_folder() {
    static std::atomic<int> counter{0};
    path = std::filesystem::temp_directory_path() / fmt::format("strata-ckpt-test-{}-{}", ::getpid(), counter++);
    std::filesystem::remove_all(path);
  }
  ~temporary_folder() { std::filesystem::remove_all(path); }
  temporary_folder(const temporary_folder&) = delete;
  temporary_folder& operator=(const temporary_folder&) = delete;
};

}  // namespace strata::conformance
