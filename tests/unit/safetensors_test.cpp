// The safetensors reader and writer, checkpoints read in place, and the way in and out of
// strata's checkpoints (export, import, weights-only restores) on loopback ranks.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <memory>

#include <catch2/catch.hpp>

#include <strata/ckpt/exchange.hpp>
#include <strata/strata.hpp>

#include "conformance/cases.hpp"
#include "conformance/temporary_folder.hpp"

using namespace strata;
namespace st = strata::ckpt::safetensors;
using conformance::temporary_folder;

namespace {

/// Writes `tensors` whose element i of tensor k is value(k, i).
void write_values(const std::filesystem::path& path, const std::vector<st::tensor_to_write>& tensors,
                  float (*value)(std::size_t, std::uint64_t)) {
  st::write(path, tensors, {{"origin", "test"}}, [&](std::size_t k, std::uint64_t first, std::span<float> out) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = value(k, first + i);
  });
}

float smooth(std::size_t k, std::uint64_t i) { return std::sin(0.001f * static_cast<float>(i) + static_cast<float>(k)); }

std::vector<float> read_all(const st::reader& r, const st::tensor_info& t) {
  std::vector<float> out(static_cast<std::size_t>(t.elements()));
  r.read_floats(t, 0, out);
  return out;
}

/// `f` throws checkpoint_error with `fragment` in its message.
template <class F>
void expect_refused(F&& f, std::string_view fragment) {
  try {
    f();
  } catch (const ckpt::checkpoint_error& e) {
    conformance::expect(std::string_view(e.what()).find(fragment) != std::string_view::npos, "unexpected message: {}",
                        e.what());
    return;
  }
  conformance::expect(false, "not refused: expected \"{}\"", fragment);
}

using Dense = Strategy<AllReduce<Ring>>;

/// A two-variable model trained `updates` updates with momentum on loopback ranks.
struct mlp {
  std::vector<float> w = std::vector<float>(6 * 4, 0.5f), gw = std::vector<float>(6 * 4), b = std::vector<float>(4, 0.1f),
                     gb = std::vector<float>(4);
  model<Dense> m;
  mlp() {
    m.add(variable<Dense>("fc.weight", w, gw, {6, 4}));
    m.add(variable<Dense>("fc.bias", b, gb, {4}));
  }
  template <class Exec>
  void train(Exec& exec, int rank, int updates) {
    for (int u = 0; u < updates; ++u) {
      for (std::size_t i = 0; i < gw.size(); ++i) gw[i] = std::cos(static_cast<float>(i + rank + u));
      for (std::size_t i = 0; i < gb.size(); ++i) gb[i] = std::sin(static_cast<float>(i * 3 + rank + u));
      exec.step();
    }
  }
};

}  // namespace

TEST_CASE("safetensors: a written file reads back in every dtype, in pieces", "[checkpoint][safetensors]") {
  temporary_folder folder;
  std::filesystem::create_directories(folder.path);
  const auto path = folder.path / "t.safetensors";
  // More elements than one piece, so that reading and writing cross piece boundaries.
  const std::uint64_t big = st::detail::piece_elements + 12345;
  write_values(path,
               {{"a.f32", st::dtype::f32, {big}},
                {"b.f16", st::dtype::f16, {3, 5}},
                {"c.bf16", st::dtype::bf16, {7}},
                {"d.f64", st::dtype::f64, {2, 2}},
                {"e.scalar", st::dtype::f32, {}}},
               smooth);
  const st::reader r(path.string());
  REQUIRE(r.tensors().size() == 5);
  CHECK(r.metadata().at("origin") == "test");
  const auto* a = r.find("a.f32");
  REQUIRE(a != nullptr);
  CHECK(a->shape == std::vector<std::uint64_t>{big});
  const std::vector<float> values = read_all(r, *a);
  bool exact = true;
  for (std::uint64_t i = 0; i < big; ++i) exact = exact && values[i] == smooth(0, i);
  CHECK(exact);
  // A range that starts inside the first piece and ends in the second.
  std::vector<float> middle(100);
  r.read_floats(*a, st::detail::piece_elements - 50, middle);
  CHECK(middle[0] == smooth(0, st::detail::piece_elements - 50));
  CHECK(middle[99] == smooth(0, st::detail::piece_elements + 49));
  const std::vector<float> halves = read_all(r, *r.find("b.f16"));
  for (std::size_t i = 0; i < halves.size(); ++i)
    CHECK(halves[i] == strata::detail::half_bits_to_float(strata::detail::float_to_half_bits(smooth(1, i))));
  const std::vector<float> brains = read_all(r, *r.find("c.bf16"));
  for (std::size_t i = 0; i < brains.size(); ++i)
    CHECK(brains[i] == strata::detail::bfloat16_bits_to_float(strata::detail::float_to_bfloat16_bits(smooth(2, i))));
  CHECK(read_all(r, *r.find("d.f64"))[3] == smooth(3, 3));
  CHECK(r.find("e.scalar")->elements() == 1);
  // The data starts 8-byte aligned, as the format asks.
  std::ifstream in(path, std::ios::binary);
  std::uint64_t header = 0;
  in.read(reinterpret_cast<char*>(&header), 8);
  CHECK(header % 8 == 0);
}

TEST_CASE("safetensors: a failed write leaves nothing under the final name", "[checkpoint][safetensors]") {
  temporary_folder folder;
  std::filesystem::create_directories(folder.path);
  const auto path = folder.path / "t.safetensors";
  auto failing = [](std::size_t k, std::uint64_t, std::span<float>) {
    if (k == 1) throw std::runtime_error("the source failed");
  };
  CHECK_THROWS_WITH(st::write(path, {{"a", st::dtype::f32, {4}}, {"b", st::dtype::f32, {4}}}, {}, failing),
                    "the source failed");
  CHECK(std::filesystem::is_empty(folder.path));
  CHECK_THROWS_AS(st::write(folder.path / "no" / "such" / "folder.safetensors", {{"a", st::dtype::f32, {4}}}, {}, failing),
                  ckpt::checkpoint_write_error);
}

TEST_CASE("a checkpoint file read in place gives the records parsed in memory", "[checkpoint][format]") {
  temporary_folder folder;
  std::filesystem::create_directories(folder.path);
  const std::vector<float> values = {1.5f, -2.0f, 3.25f, 7.0f};
  ckpt::file_builder file;
  file.add({.kind = ckpt::record_kind::slice, .name = "w", .shape = {2, 4}, .begin = 4, .count = 4, .source_rank = 1,
            .payload = std::as_bytes(std::span(values))});
  file.add(ckpt::detail::blob("meta/position", "step 7"));
  const std::vector<std::byte> image = std::move(file).finish();
  const auto path = (folder.path / "f.ckpt").string();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(image.data()), static_cast<std::streamsize>(image.size()));
  ckpt::file_reader reader(path);
  const std::vector<ckpt::record> in_place = reader.records(), in_memory = ckpt::parse_file(image, path);
  REQUIRE(in_place.size() == 2);
  CHECK(in_place[0].floats() == in_memory[0].floats());
  CHECK(in_place[0].payload_at == in_memory[0].payload_at);
  std::vector<float> two(2);
  in_place[0].read_floats(1, two);
  CHECK(two == std::vector<float>{-2.0f, 3.25f});
  CHECK(in_place[1].text() == "step 7");
  CHECK(reader.stored_crc() == ckpt::detail::stored_crc(image));
  // The file is closed once parsed; a payload read after it was replaced is refused.
  std::ofstream(path, std::ios::binary | std::ios::app).put('x');
  CHECK_THROWS_WITH(in_place[0].read_floats(0, two), Catch::Contains("changed after it was checked"));
  // A flipped byte is refused by the streaming checksum as by the one in memory.
  std::vector<std::byte> damaged = image;
  damaged[30] ^= std::byte{1};
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(damaged.data()), static_cast<std::streamsize>(damaged.size()));
  CHECK_THROWS_WITH(ckpt::file_reader(path).records(), Catch::Contains("CRC-32 does not match"));
}

TEST_CASE("an export holds the whole tensors a 2-rank checkpoint saved in slices", "[checkpoint][safetensors]") {
  temporary_folder folder;
  const ckpt::store store(folder.path / "checkpoints");
  std::map<std::string, std::vector<float>> trained;
  loopback::run(2, [&](loopback::context& ctx) {
    mlp net;
    auto exec = make_executor(ctx, net.m, optim::sgd{.lr = 0.1f, .momentum = 0.9f});
    net.train(exec, ctx.rank(), 3);
    exec.save_checkpoint(store);
    if (ctx.rank() == 0) trained = {{"fc.weight", net.w}, {"fc.bias", net.b}};
  });
  const auto exported = folder.path / "model.safetensors";
  const ckpt::export_result result = ckpt::export_safetensors(store, exported, {});
  CHECK(result.step == 3);
  CHECK(result.tensors == 2);  // no optimizer state unless asked
  const st::reader r(exported.string());
  CHECK(r.metadata().at("strata.world_size") == "2");
  for (const auto& [name, values] : trained) {
    const st::tensor_info* t = r.find(name);
    REQUIRE(t != nullptr);
    CHECK(read_all(r, *t) == values);
  }
  CHECK(r.find("fc.weight")->shape == std::vector<std::uint64_t>{6, 4});

  // With the optimizer state, in bf16, in shards of at most 64 bytes with an index.
  ckpt::export_options o;
  o.optimizer_state = true;
  o.dtype = st::dtype::bf16;
  o.max_shard_bytes = 64;
  const ckpt::export_result sharded = ckpt::export_safetensors(store, folder.path / "model.safetensors", o);
  CHECK(sharded.tensors == 4);
  REQUIRE(sharded.files.size() >= 3);
  CHECK(sharded.files.back().filename() == "model.safetensors.index.json");
  const auto files = ckpt::open_safetensors(sharded.files.back());
  std::size_t found = 0;
  for (const auto& f : files)
    for (const auto& t : f->tensors()) {
      CHECK(t.dtype_name == "BF16");
      ++found;
    }
  CHECK(found == 4);

  // The shards load back through their index: the weights (bf16 now), not the optimizer
  // state the files also carry; and a name in two shards is refused.
  const std::filesystem::path index = sharded.files.back();
  loopback::run(2, [&](loopback::context& ctx) {
    mlp net;
    auto exec = make_executor(ctx, net.m, optim::sgd{.lr = 0.1f, .momentum = 0.9f});
    exec.load_weights(index);
    for (std::size_t i = 0; i < net.w.size(); ++i)
      conformance::expect(net.w[i] == strata::detail::bfloat16_bits_to_float(
                                          strata::detail::float_to_bfloat16_bits(trained.at("fc.weight")[i])),
                          "fc.weight[{}] is {}", i, net.w[i]);
    const ckpt::state_set state = exec.state();
    for (const auto& t : state.tensors())
      if (t.name.ends_with("/momentum_buffer"))
        conformance::expect(std::all_of(t.data.begin(), t.data.end(), [](float x) { return x == 0.0f; }),
                            "{} was loaded from the file", t.name);
  });
  const ckpt::store reimported(folder.path / "reimported");
  CHECK(ckpt::import_safetensors(index, reimported).tensors == 4);
  // A name in two files of one set is refused, naming both.
  std::filesystem::copy_file(sharded.files[0], folder.path / "copy.safetensors");
  std::vector<std::unique_ptr<st::reader>> two;
  two.push_back(std::make_unique<st::reader>(sharded.files[0].string()));
  two.push_back(std::make_unique<st::reader>((folder.path / "copy.safetensors").string()));
  CHECK_THROWS_WITH(ckpt::weight_records(two), Catch::Contains("is both in"));
}

TEST_CASE("imported weights restore into any world size, the optimizer state fresh", "[checkpoint][safetensors]") {
  temporary_folder folder;
  std::filesystem::create_directories(folder.path);
  const auto weights = folder.path / "w.safetensors";
  write_values(weights, {{"fc.weight", st::dtype::f32, {6, 4}}, {"fc.bias", st::dtype::f16, {4}}}, smooth);
  const ckpt::store store(folder.path / "imported");
  const ckpt::import_result imported = ckpt::import_safetensors(weights, store);
  CHECK(imported.tensors == 2);
  CHECK(imported.elements == 28);
  CHECK_THROWS_WITH(ckpt::import_safetensors(weights, store), Catch::Contains("holds checkpoints already"));
  for (int ranks : {1, 3}) {
    loopback::run(ranks, [&](loopback::context& ctx) {
      mlp net;
      auto exec = make_executor(ctx, net.m, optim::sgd{.lr = 0.1f, .momentum = 0.9f});
      const auto restored = exec.restore_checkpoint(store);
      conformance::expect(restored && restored->step == 0 && restored->description.weights_only, "no weights-only restore");
      for (std::size_t i = 0; i < net.w.size(); ++i)
        conformance::expect(net.w[i] == smooth(0, i), "fc.weight[{}] is {}", i, net.w[i]);
      conformance::expect(net.b[2] == strata::detail::half_bits_to_float(strata::detail::float_to_half_bits(smooth(1, 2))),
                          "fc.bias was not converted from float16");
      net.train(exec, ctx.rank(), 1);  // the momentum starts at zero
    });
  }
}

TEST_CASE("imported weights that the model lacks, or lack a weight it has, are refused by name",
          "[checkpoint][safetensors]") {
  temporary_folder folder;
  std::filesystem::create_directories(folder.path);
  const auto extra = folder.path / "extra.safetensors";
  write_values(extra, {{"fc.weight", st::dtype::f32, {6, 4}}, {"fc.bias", st::dtype::f32, {4}}, {"head.weight", st::dtype::f32, {2}}},
               smooth);
  const auto missing = folder.path / "missing.safetensors";
  write_values(missing, {{"fc.weight", st::dtype::f32, {6, 4}}}, smooth);
  const ckpt::store with_extra(folder.path / "extra"), with_missing(folder.path / "missing");
  ckpt::import_safetensors(extra, with_extra);
  ckpt::import_safetensors(missing, with_missing);
  loopback::run(2, [&](loopback::context& ctx) {
    mlp net;
    auto exec = make_executor(ctx, net.m, optim::sgd{.lr = 0.1f});
    expect_refused([&] { exec.restore_checkpoint(with_extra); }, "\"head.weight\", which the model has no tensor of");
    expect_refused([&] { exec.restore_checkpoint(with_missing); }, "has no \"fc.bias\"");
    expect_refused([&] { exec.load_weights(extra); }, "\"head.weight\", which the model has no tensor of");
    expect_refused([&] { exec.load_weights(missing); }, "has no \"fc.bias\"");
  });
}

TEST_CASE("executor::load_weights fills the parameters on every rank and keeps the optimizer state",
          "[checkpoint][safetensors]") {
  temporary_folder folder;
  std::filesystem::create_directories(folder.path);
  const auto weights = folder.path / "w.safetensors";
  write_values(weights, {{"fc.weight", st::dtype::bf16, {6, 4}}, {"fc.bias", st::dtype::f32, {4}}}, smooth);
  const auto wrong = folder.path / "wrong.safetensors";
  write_values(wrong, {{"fc.weight", st::dtype::f32, {4, 6}}, {"fc.bias", st::dtype::f32, {4}}}, smooth);
  loopback::run(3, [&](loopback::context& ctx) {
    mlp net;
    auto exec = make_executor(ctx, net.m, optim::sgd{.lr = 0.1f, .momentum = 0.9f});
    net.train(exec, ctx.rank(), 2);
    auto momentum = [&] {
      const ckpt::state_set s = exec.state();
      for (const auto& t : s.tensors())
        if (t.name == "fc.weight/momentum_buffer") return std::vector<float>(t.data.begin(), t.data.end());
      return std::vector<float>{};
    };
    const std::vector<float> before = momentum();
    conformance::expect(!before.empty() && before[0] != 0.0f, "no momentum to keep");
    exec.load_weights(weights);
    for (std::size_t i = 0; i < net.w.size(); ++i)
      conformance::expect(net.w[i] == strata::detail::bfloat16_bits_to_float(strata::detail::float_to_bfloat16_bits(smooth(0, i))),
                          "fc.weight[{}] is {}", i, net.w[i]);
    conformance::expect(net.b[3] == smooth(1, 3), "fc.bias[3] is {}", net.b[3]);
    conformance::expect(momentum() == before, "the momentum changed");
    conformance::expect(exec.updates() == 2, "the update count changed");
    expect_refused([&] { exec.load_weights(wrong); }, "\"fc.weight\" with shape [4,6]");
  });
}
