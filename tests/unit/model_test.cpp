#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "strata/comm/node_memory.hpp"
#include "strata/model/huge_pages.hpp"
#include "strata/model/model.hpp"
#include "strata/model/tensor_arena.hpp"

using namespace strata;
using Dense = Strategy<AllReduce<Ring>>;
using Plain = Strategy<>;

TEST_CASE("a model groups variables by strategy and keeps declaration order", "[model]") {
  std::vector<float> w(12), gw(12), b(3), gb(3), v(4), gv(4);
  auto m = make_model(variable<Dense>("w", w, gw, {3, 4}), variable<Plain>("b", b, gb, {3}),
                      variable<Dense>("v", v, gv, {4}));
  static_assert(decltype(m)::strategy_count == 2);
  CHECK(m.variables().size() == 3);
  CHECK(m.id("b").index == 1);
  CHECK(m.ids_of<Dense>() == std::vector<variable_id>{{0}, {2}});
  CHECK(m[m.id("w")].shape == std::vector<std::size_t>{3, 4});
  CHECK(m[m.id("w")].strategy == "Replicate,AllReduce<Ring>");
}

TEST_CASE("binding a buffer of the wrong size names the variable", "[model]") {
  std::vector<float> w(12), g(11);
  CHECK_THROWS_AS(variable<Dense>("fc1.weight", w, g, {3, 4}), binding_error);
  CHECK_THROWS_WITH(variable<Dense>("fc1.weight", w, g, {3, 4}),
                    Catch::Contains("variable \"fc1.weight\": the gradient buffer holds 11 floats but shape [3, 4] needs 12"));
  CHECK_THROWS_WITH(variable<Dense>("fc2.weight", w, w, {5, 2}), Catch::Contains("fc2.weight"));
}

TEST_CASE("two variables with one name are refused", "[model]") {
  std::vector<float> w(4), g(4);
  CHECK_THROWS_WITH(make_model(variable<Dense>("w", w, g, {4}), variable<Plain>("w", w, g, {2, 2})),
                    Catch::Contains("variable \"w\" is declared twice"));
  model<Dense> m;
  m.add(variable<Dense>("layer0", w, g, {4}));
  CHECK_THROWS_AS(m.add(variable<Dense>("layer0", w, g, {4})), binding_error);
  CHECK_THROWS_WITH(m.id("layer1"), Catch::Contains("no variable called \"layer1\""));
  // An id of another model is a usage error (exit 64), not an out_of_range worth a restart.
  CHECK_THROWS_WITH(m[variable_id{1}], Catch::Contains("variable id 1 is not one of this model's 1 variables"));
  CHECK_THROWS_AS(m.strategy_of(variable_id{7}), binding_error);
}

TEST_CASE("shapes take extents of any integer type, and refuse negative ones", "[model]") {
  std::vector<float> w(12), g(12);
  const int rows = 3, cols = 4;  // a std::size_t shape would narrow these
  const long negative = -3;
  CHECK(variable<Dense>("w", w, g, {rows, cols}).binding.shape == std::vector<std::size_t>{3, 4});
  CHECK(variable<Dense>("w", w, g, {12u}).binding.shape == std::vector<std::size_t>{12});
  CHECK_THROWS_WITH(variable<Dense>("w", w, g, {negative, -4L}),
                    Catch::Contains("variable \"w\": extent 0 of its shape is -3; extents must be 0 or more"));
}

namespace {
/// The THPeligible line of the mapping that holds `p` in /proc/self/smaps: 1 where the kernel
/// may back it with huge pages; -1 where the mapping or the line is not found.
int huge_page_eligible(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::uintptr_t begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " ", &begin, &end) == 2 && line.find(':') > line.find('-'))
      inside = begin <= at && at < end;
    else if (inside && line.rfind("THPeligible:", 0) == 0)
      return std::stoi(line.substr(12));
  }
  return -1;
}

std::string transparent_huge_pages_mode() {
  std::ifstream mode("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string text;
  std::getline(mode, text);
  return text;
}
}  // namespace

TEST_CASE("host_vector puts buffers of a huge page or more on huge pages, and smaller ones on the heap", "[model][memory]") {
  host_vector<float> large(huge_page_bytes / sizeof(float) + 3, 1.5f), small(1000, 2.5f);
  CHECK(reinterpret_cast<std::uintptr_t>(large.data()) % huge_page_bytes == 0);
  CHECK(std::ranges::all_of(large, [](float x) { return x == 1.5f; }));
  CHECK(std::ranges::all_of(small, [](float x) { return x == 2.5f; }));

  // Growing across the threshold moves the contents onto a mapping of its own and back.
  host_vector<int> grows;
  for (int i = 0; i < static_cast<int>(huge_page_bytes / sizeof(int)) * 2; ++i) grows.push_back(i);
  CHECK(grows[12345] == 12345);
  CHECK(grows.back() == static_cast<int>(grows.size()) - 1);
  grows.resize(10);
  grows.shrink_to_fit();
  CHECK(grows == host_vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});

  const std::string mode = transparent_huge_pages_mode();
  if (mode.empty() || mode.find("[never]") != std::string::npos) {
    WARN("not checked whether the kernel may use huge pages: transparent huge pages are off here ("
         << (mode.empty() ? std::string("no /sys/kernel/mm/transparent_hugepage") : mode) << ")");
    return;
  }
  CHECK(huge_page_eligible(large.data()) == 1);
}

TEST_CASE("node memory is shared with the machine's ranks where it may stay on huge pages", "[model][memory]") {
  node_vector<float> small(1000, 2.5f), large(huge_page_bytes / sizeof(float) + 3, 1.5f);
  CHECK(std::ranges::all_of(small, [](float x) { return x == 2.5f; }));
  CHECK(std::ranges::all_of(large, [](float x) { return x == 1.5f; }));
  // A small buffer is a region of its own: huge pages do not matter to it.
  const shared_region region = node_region_of(small.data() + 999);
  CHECK(region.id != 0);
  CHECK(region.begin == reinterpret_cast<std::uintptr_t>(small.data()));
  CHECK(region.bytes >= small.size() * sizeof(float));
  CHECK(node_region_of(large.data()).id != node_region_of(small.data()).id);
  std::vector<float> elsewhere(10);
  CHECK(node_region_of(elsewhere.data()).id == 0);
  // A large one is shared only where shared memory may take huge pages (else it is
  // host_vector's memory), and either way lies on them where the kernel uses them.
  std::ifstream shmem("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  std::string modes;
  std::getline(shmem, modes);
  const bool shared_huge = modes.find("[always]") != std::string::npos ||
                           modes.find("[within_size]") != std::string::npos ||
                           modes.find("[advise]") != std::string::npos || modes.find("[force]") != std::string::npos;
  CHECK((node_region_of(large.data()).id != 0) == shared_huge);
  const std::string mode = transparent_huge_pages_mode();
  if (mode.empty() || mode.find("[never]") != std::string::npos) {
    WARN("not checked whether the kernel may use huge pages: transparent huge pages are off here ("
         << (mode.empty() ? std::string("no /sys/kernel/mm/transparent_hugepage") : mode) << ")");
    return;
  }
  CHECK(huge_page_eligible(large.data()) == 1);
}

TEST_CASE("a tensor_arena packs tensors into one buffer on huge pages, the last first unless asked otherwise",
          "[model][memory]") {
  const std::vector<std::size_t> elements = {5, 0, huge_page_bytes / sizeof(float), 3};
  tensor_arena<float> backward(elements, tensor_arena<float>::layout::backward, 0.5f);
  REQUIRE(backward.size() == 4);
  CHECK(backward.memory().size() == 8 + huge_page_bytes / sizeof(float));
  CHECK(reinterpret_cast<std::uintptr_t>(backward.memory().data()) % huge_page_bytes == 0);
  // Backward: each tensor right after the one declared after it, the last at the start.
  CHECK(backward[3].data() == backward.memory().data());
  for (std::size_t i = 0; i + 1 < elements.size(); ++i) {
    CHECK(backward[i].size() == elements[i]);
    CHECK(backward[i].data() == backward[i + 1].data() + backward[i + 1].size());
  }
  CHECK(std::ranges::all_of(backward.memory(), [](float x) { return x == 0.5f; }));

  tensor_arena<float> forward(elements, tensor_arena<float>::layout::forward);
  CHECK(forward[0].data() == forward.memory().data());
  for (std::size_t i = 0; i + 1 < elements.size(); ++i) CHECK(forward[i + 1].data() == forward[i].data() + forward[i].size());

  // Moving keeps the memory where it is, so spans handed out stay valid.
  const float* first = backward[0].data();
  tensor_arena<float> moved = std::move(backward);
  CHECK(moved[0].data() == first);
  CHECK_THROWS_AS(moved[4], std::out_of_range);
}

TEST_CASE("a message buffer keeps its bytes across resizes and grows large messages onto whole huge pages",
          "[model][memory]") {
  message_bytes buffer;
  resize_message(buffer, 100);
  CHECK(buffer.size() == 100);
  CHECK(buffer.capacity() < huge_page_bytes);  // small messages stay on the heap
  for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<std::byte>(i);

  // A quarter huge page or more: whole huge pages, aligned, and the first bytes kept.
  resize_message(buffer, huge_page_bytes / 4 + 1);
  CHECK(buffer.capacity() == huge_page_bytes);
  CHECK(reinterpret_cast<std::uintptr_t>(buffer.data()) % huge_page_bytes == 0);
  CHECK(buffer[99] == std::byte{99});
  resize_message(buffer, huge_page_bytes + 1);
  CHECK(buffer.capacity() == 2 * huge_page_bytes);
  CHECK(buffer[42] == std::byte{42});

  // Shrinking and growing again within the capacity moves nothing and writes nothing.
  const std::byte* storage = buffer.data();
  buffer[huge_page_bytes / 2] = std::byte{7};
  resize_message(buffer, 10);
  resize_message(buffer, huge_page_bytes);
  CHECK(buffer.data() == storage);
  CHECK(buffer[huge_page_bytes / 2] == std::byte{7});  // an allocator that zeroes what a resize adds fails here
}
