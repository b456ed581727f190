#pragma once
// Loader for the Fashion-MNIST IDX files shipped by Debian's dataset-fashion-mnist package
// (/usr/share/datasets/fashion-mnist), read in place through zlib.

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <zlib.h>

#include <strata/error.hpp>

namespace fashion_mnist {

/// One split: images row-major, one 28x28 image after another.
struct dataset {
  static constexpr std::size_t pixels = 28 * 28;

  std::vector<float> images;         ///< size() * pixels values, scaled as the loader was asked (pixel_scale)
  std::vector<std::uint8_t> labels;  ///< class ids in [0, 10)

  std::size_t size() const { return labels.size(); }
};

/// How pixel bytes become inputs: standardized with the train split's mean and deviation, or
/// x / 255 (what the PyTorch peer programs feed their models).
enum class pixel_scale { standardized, unit_range };

namespace detail {

// Statistics of the train split. The test split is normalized with them as well, so the
// model sees the same input transform at evaluation as in training.
inline constexpr float train_mean = 0.2860f;
inline constexpr float train_std = 0.3530f;
inline constexpr std::size_t num_classes = 10;

/// A damaged or foreign dataset file is the user's to fix (--data): a usage error, which a
/// launcher does not restart.
[[noreturn]] inline void fail(const std::filesystem::path& file, const std::string& what) {
  throw strata::usage_error("fashion_mnist: " + file.string() + ": " + what);
}

// A gzip stream that reports every short read as an error naming the file.
class gz_reader {
 public:
  explicit gz_reader(std::filesystem::path file) : file_(std::move(file)) {
    if (!std::filesystem::exists(file_)) {
      fail(file_, "file not found (install it with `apt-get install dataset-fashion-mnist`)");
    }
    handle_.reset(gzopen(file_.c_str(), "rb"));
    if (!handle_) fail(file_, "cannot open");
  }

  // Reads exactly `size` bytes; `what` names them in the error message.
  void read(void* out, std::size_t size, std::string_view what) {
    auto* bytes = static_cast<unsigned char*>(out);
    std::size_t done = 0;
    while (done < size) {
      // gzread takes an unsigned length but returns an int, so read at most INT_MAX at a time.
      const auto chunk = static_cast<unsigned>(std::min<std::size_t>(size - done, INT_MAX));
      const int got = gzread(handle_.get(), bytes + done, chunk);
      if (got < 0) {
        int code = 0;
        fail(file_, "read error while reading " + std::string(what) + ": " + gzerror(handle_.get(), &code));
      }
      if (got == 0) {
        fail(file_, "truncated: expected " + std::to_string(size) + " bytes of " + std::string(what) + ", got " +
                        std::to_string(done));
      }
      done += static_cast<std::size_t>(got);
    }
  }

  // IDX integers are big-endian regardless of the host.
  std::uint32_t read_u32(std::string_view what) {
    std::array<unsigned char, 4> b{};
    read(b.data(), b.size(), what);
    return std::uint32_t{b[0]} << 24 | std::uint32_t{b[1]} << 16 | std::uint32_t{b[2]} << 8 | std::uint32_t{b[3]};
  }

  const std::filesystem::path& path() const { return file_; }

 private:
  struct closer {
    void operator()(gzFile f) const { gzclose(f); }
  };

  std::filesystem::path file_;
  std::unique_ptr<gzFile_s, closer> handle_;
};

// Reads `count` items of `item_bytes` each, growing the buffer as the data arrives: a header
// that claims billions of items ends in a clear "file ends" error, not a huge allocation.
inline std::vector<std::uint8_t> read_items(gz_reader& in, std::size_t count, std::size_t item_bytes, std::string_view what) {
  constexpr std::size_t items_per_read = 4096;
  std::vector<std::uint8_t> data;
  for (std::size_t done = 0; done < count;) {
    const std::size_t n = std::min(items_per_read, count - done);
    data.resize((done + n) * item_bytes);
    in.read(data.data() + done * item_bytes, n * item_bytes, what);
    done += n;
  }
  return data;
}

// Checks the magic number and returns the item count that follows it.
inline std::size_t read_header(gz_reader& in, std::uint32_t expected_magic) {
  const std::uint32_t magic = in.read_u32("header");
  if (magic != expected_magic) {
    fail(in.path(), "bad magic number " + std::to_string(magic) + ", expected " + std::to_string(expected_magic) +
                        " (not an IDX file of this kind?)");
  }
  return in.read_u32("header");
}

inline std::vector<float> read_images(const std::filesystem::path& file, pixel_scale scale) {
  gz_reader in(file);
  const std::size_t count = read_header(in, 2051);
  const std::uint32_t rows = in.read_u32("header");
  const std::uint32_t cols = in.read_u32("header");
  if (std::size_t{rows} * cols != dataset::pixels) {
    fail(file, "images are " + std::to_string(rows) + "x" + std::to_string(cols) + ", expected 28x28");
  }
  const std::vector<std::uint8_t> raw = read_items(in, count, dataset::pixels, "pixel data");

  std::vector<float> images(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const float unit = static_cast<float>(raw[i]) / 255.0f;
    images[i] = scale == pixel_scale::standardized ? (unit - train_mean) / train_std : unit;
  }
  return images;
}

inline std::vector<std::uint8_t> read_labels(const std::filesystem::path& file) {
  gz_reader in(file);
  const std::size_t count = read_header(in, 2049);
  const std::vector<std::uint8_t> labels = read_items(in, count, 1, "labels");
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= num_classes) {
      fail(file,
           "label " + std::to_string(labels[i]) + " at index " + std::to_string(i) + " is not a class id in [0, 10)");
    }
  }
  return labels;
}

}  // namespace detail

/// Loads `split` ("train" or "t10k") from `dir`, e.g. /usr/share/datasets/fashion-mnist. Throws
/// strata::usage_error naming the file when one is missing, truncated or not the IDX file expected.
inline dataset load(const std::filesystem::path& dir, std::string_view split,
                    pixel_scale scale = pixel_scale::standardized) {
  if (split != "train" && split != "t10k") {
    throw std::invalid_argument("fashion_mnist: unknown split \"" + std::string(split) +
                                "\", expected \"train\" or \"t10k\"");
  }
  const std::string prefix(split);
  const auto image_file = dir / (prefix + "-images-idx3-ubyte.gz");
  const auto label_file = dir / (prefix + "-labels-idx1-ubyte.gz");

  dataset data{detail::read_images(image_file, scale), detail::read_labels(label_file)};
  if (data.images.size() != data.size() * dataset::pixels) {
    throw strata::usage_error("fashion_mnist: " + image_file.string() + " holds " +
                             std::to_string(data.images.size() / dataset::pixels) + " images but " +
                             label_file.string() + " holds " + std::to_string(data.size()) + " labels");
  }
  return data;
}

}  // namespace fashion_mnist
