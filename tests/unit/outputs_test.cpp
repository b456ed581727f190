// What a run will write, checked before it starts (strata/detail/outputs.hpp), and where a
// timeline goes (trace::timeline::file_of).
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "strata/detail/outputs.hpp"
#include "strata/exit_status.hpp"
#include "strata/trace/timeline.hpp"

using namespace strata;
using Catch::Contains;
namespace fs = std::filesystem;

TEST_CASE("an output file must be a file name in a folder that can be written", "[outputs]") {
  const fs::path work = fs::temp_directory_path() / "strata_outputs_test";
  fs::remove_all(work);
  fs::create_directories(work);
  std::ofstream(work / "a_file") << "x";
  CHECK_NOTHROW(require_writable_file(work / "new.bin", "--out"));
  CHECK_NOTHROW(require_writable_file(work / "a_file", "--out"));  // replaced
  CHECK_NOTHROW(require_writable_file(work / "made" / "later" / "new.bin", "--out"));  // folders made on the way
  CHECK_THROWS_WITH(require_writable_file(work, "--out"), Contains("is a folder; give a file name"));
  CHECK_THROWS_WITH(require_writable_file(work.string() + "/", "--out"), Contains("ends with '/', a folder"));
  CHECK_THROWS_WITH(require_writable_file("/dev/full", "--out"), Contains("\"/dev/full\" is not a regular file"));
  CHECK_THROWS_WITH(require_writable_file(work / "a_file" / "x.bin", "--out"),
                    Contains("a_file\", on the way to") && Contains("is not a folder"));
  CHECK_THROWS_WITH(require_writable_file("", "--out"), Contains("--out: the path is empty"));
  CHECK_THROWS_AS(require_writable_file(work, "--out"), usage_error);
  fs::remove_all(work);
}

TEST_CASE("an output folder must be a folder, or be makeable", "[outputs]") {
  const fs::path work = fs::temp_directory_path() / "strata_outputs_folder_test";
  fs::remove_all(work);
  fs::create_directories(work);
  std::ofstream(work / "a_file") << "x";
  CHECK_NOTHROW(require_writable_folder(work, "--dir"));
  CHECK_NOTHROW(require_writable_folder(work / "new" / "deeper", "--dir"));
  CHECK_THROWS_WITH(require_writable_folder(work / "a_file", "--dir"), Contains("exists and is not a folder"));
  CHECK_THROWS_WITH(require_writable_folder(work / "a_file" / "sub", "--dir"), Contains("is not a folder"));
  CHECK_THROWS_WITH(require_writable_folder("/dev/null", "--dir"), Contains("exists and is not a folder"));
  fs::remove_all(work);
}

TEST_CASE("an output that cannot be written ends a program with 74, the wrong kind of path with 64", "[outputs]") {
  CHECK(exit_status_of(output_error("--out: cannot write into \"/ro\"")) == exit_cannot_write);
  CHECK(exit_status_of(usage_error("--out: \"/tmp\" is a folder")) == exit_usage);
}

TEST_CASE("a timeline's file per rank: beside a file name, inside a folder", "[outputs][timeline]") {
  CHECK(trace::timeline::file_of("run.json", 3) == fs::path("run.rank3.json"));
  CHECK(trace::timeline::file_of("out/run", 0) == fs::path("out/run.rank0.json"));
  CHECK(trace::timeline::file_of("out/", 2) == fs::path("out/timeline.rank2.json"));  // was out/.rank2.json
  CHECK(trace::timeline::file_of(fs::temp_directory_path(), 1) == fs::temp_directory_path() / "timeline.rank1.json");
}
