#pragma once
// The safetensors format's non-template code: compiled in every translation unit when strata
// is header-only, once under STRATA_SEPARATE_COMPILATION (see config.hpp).
#include <algorithm>
#include <cstring>
#include <limits>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "strata/ckpt/safetensors.hpp"
#include "strata/numeric/float16.hpp"

namespace strata::ckpt::safetensors {
namespace detail {

inline void decode(dtype t, const std::byte* in, std::span<float> out) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (t == dtype::f32) {
      std::memcpy(&out[i], in + 4 * i, 4);
    } else if (t == dtype::f64) {
      double d;
      std::memcpy(&d, in + 8 * i, 8);
      out[i] = static_cast<float>(d);
    } else {
      std::uint16_t bits;
      std::memcpy(&bits, in + 2 * i, 2);
      out[i] = t == dtype::f16 ? strata::detail::half_bits_to_float(bits) : strata::detail::bfloat16_bits_to_float(bits);
    }
  }
}

inline void encode(dtype t, std::span<const float> in, std::byte* out) {
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (t == dtype::f32) {
      std::memcpy(out + 4 * i, &in[i], 4);
    } else if (t == dtype::f64) {
      const double d = in[i];
      std::memcpy(out + 8 * i, &d, 8);
    } else {
      const std::uint16_t bits =
          t == dtype::f16 ? strata::detail::float_to_half_bits(in[i]) : strata::detail::float_to_bfloat16_bits(in[i]);
      std::memcpy(out + 2 * i, &bits, 2);
    }
  }
}

/// The tensor `name` as the header's `entry` describes it, checked against the data section
/// (`data_bytes` at byte `data_at` of the file); refused with `fail(why)`.
template <class Fail>
tensor_info parse_tensor(const std::string& name, const nlohmann::json& entry, std::uint64_t data_at,
                         std::uint64_t data_bytes, const Fail& fail) {
  const std::string quoted = text::cat("tensor \"", text::excerpt(name, 96), "\"");
  if (!entry.is_object()) throw fail(text::cat(quoted, " is not described by an object"));
  tensor_info t;
  t.name = name;
  const auto dtype_field = entry.find("dtype");
  if (dtype_field == entry.end() || !dtype_field->is_string()) throw fail(text::cat(quoted, " has no dtype"));
  t.dtype_name = dtype_field->get<std::string>();
  const auto element_bytes = format_element_bytes(t.dtype_name);
  if (!element_bytes) throw fail(text::cat(quoted, " has unknown dtype \"", text::excerpt(t.dtype_name, 32), "\""));
  if (const auto converted = dtype_named(t.dtype_name); converted && name_of(*converted) == t.dtype_name) t.type = converted;
  const auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array()) throw fail(text::cat(quoted, " has no shape"));
  std::uint64_t elements = 1;
  for (const auto& extent : *shape) {
    if (!extent.is_number_unsigned()) throw fail(text::cat(quoted, " has a shape of other than whole numbers"));
    const std::uint64_t d = extent.get<std::uint64_t>();
    if (d != 0 && elements > std::numeric_limits<std::uint64_t>::max() / d)
      throw fail(text::cat(quoted, " has a shape whose size overflows"));
    elements *= d;
    t.shape.push_back(d);
  }
  const auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned())
    throw fail(text::cat(quoted, " has no data_offsets [begin, end]"));
  t.begin = (*offsets)[0].get<std::uint64_t>();
  t.end = (*offsets)[1].get<std::uint64_t>();
  if (t.begin > t.end) throw fail(text::cat(quoted, " has data_offsets [", t.begin, ", ", t.end, "] that end before they begin"));
  if (t.end > data_bytes)
    throw fail(text::cat(quoted, " ends at byte ", data_at + t.end, ", past the end of the file at byte ",
                         data_at + data_bytes, " (truncated?)"));
  if (elements > std::numeric_limits<std::uint64_t>::max() / *element_bytes || t.end - t.begin != elements * *element_bytes)
    throw fail(text::cat(quoted, " has shape [", text::join(t.shape, ","), "] of ", t.dtype_name, ", ",
                         elements * *element_bytes, " bytes, but its data_offsets hold ", t.end - t.begin));
  return t;
}

}  // namespace detail

STRATA_DECL std::optional<std::size_t> format_element_bytes(std::string_view name) {
  static const std::map<std::string_view, std::size_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1}, {"I16", 2}, {"U16", 2},
      {"F16", 2},  {"BF16", 2}, {"I32", 4}, {"U32", 4},    {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8},
      {"C64", 8}};
  const auto it = sizes.find(name);
  return it == sizes.end() ? std::nullopt : std::optional(it->second);
}

STRATA_DECL reader::reader(std::string path) : path_(std::move(path)) {
  struct stat st {};
  std::string why;
  fd_ = strata::ckpt::detail::open_regular(path_, st, why);
  if (!fd_.open()) throw fail(why);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < 8) throw fail(text::cat("it has ", size, " bytes, fewer than the 8 of the header's length (truncated)"));
  std::uint64_t header_bytes = 0;
  read_bytes(0, std::as_writable_bytes(std::span(&header_bytes, 1)));
  if (header_bytes > max_header_bytes)
    throw fail(text::cat("its header length at byte 0 says ", header_bytes, " bytes, over the limit of ",
                         max_header_bytes));
  if (header_bytes > size - 8)
    throw fail(text::cat("its header of ", header_bytes, " bytes runs past the end of the file at byte ", size,
                         " (truncated)"));
  data_at_ = 8 + header_bytes;
  data_bytes_ = size - data_at_;
  std::string header(static_cast<std::size_t>(header_bytes), '\0');
  read_bytes(8, std::as_writable_bytes(std::span(header)));
  if (!header.starts_with('{')) throw fail("its header at byte 8 does not start with '{'");
  parse_header(header);
}

STRATA_DECL std::vector<record> reader::records() const {
  std::vector<record> out;
  for (std::size_t k = 0; k < tensors_.size(); ++k) {
    const tensor_info& t = tensors_[k];
    require_convertible(t);
    record r;
    r.kind = record_kind::slice;
    r.name = t.name;
    r.shape = t.shape;
    r.count = t.elements();
    r.file = this;
    r.payload_at = k;
    out.push_back(std::move(r));
  }
  return out;
}

STRATA_DECL void reader::read_floats(const tensor_info& t, std::uint64_t first, std::span<float> out) const {
  require_convertible(t);
  const std::size_t bytes = size_of(*t.type);
  std::vector<std::byte> piece(std::min(out.size(), detail::piece_elements) * bytes);
  for (std::size_t done = 0; done < out.size();) {
    const std::size_t n = std::min(out.size() - done, detail::piece_elements);
    read_bytes(data_at_ + t.begin + (first + done) * bytes, std::span(piece.data(), n * bytes));
    detail::decode(*t.type, piece.data(), out.subspan(done, n));
    done += n;
  }
}

STRATA_DECL void reader::parse_header(const std::string& header) {
  // nlohmann_json keeps the last of two equal keys: the callback sees every key of the top
  // object, so that a name given twice is refused instead.
  std::vector<std::string> keys;
  const nlohmann::json::parser_callback_t note_keys = [&](int depth, nlohmann::json::parse_event_t event,
                                                          nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1) keys.push_back(parsed.get<std::string>());
    return true;
  };
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(header, note_keys);
  } catch (const nlohmann::json::parse_error& e) {
    throw fail(text::cat("its header is not valid JSON at byte ", 8 + e.byte - (e.byte > 0 ? 1 : 0), " of the file: ",
                         text::excerpt(e.what(), 160)));
  }
  std::sort(keys.begin(), keys.end());
  if (const auto twice = std::adjacent_find(keys.begin(), keys.end()); twice != keys.end())
    throw fail(text::cat("its header names tensor \"", text::excerpt(*twice, 96), "\" twice"));
  for (const auto& [name, entry] : json.items()) {
    if (name == "__metadata__") {
      if (entry.is_null()) continue;
      if (!entry.is_object()) throw fail("its \"__metadata__\" is not an object of strings");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string())
          throw fail(text::cat("its \"__metadata__\" entry \"", text::excerpt(key, 96), "\" is not a string"));
        metadata_.emplace(key, value.get<std::string>());
      }
      continue;
    }
    tensors_.push_back(
        detail::parse_tensor(name, entry, data_at_, data_bytes_, [this](std::string_view why) { return fail(why); }));
  }
  std::sort(tensors_.begin(), tensors_.end(), [](const tensor_info& a, const tensor_info& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
  });
  // The reference implementation's rule: the tensors tile the data section exactly.
  std::uint64_t at = 0;
  for (const tensor_info& t : tensors_) {
    if (t.begin != at)
      throw fail(text::cat("tensor \"", t.name, "\" starts at byte ", data_at_ + t.begin, ", but the tensor before it ",
                           t.begin < at ? "overlaps it up to byte " : "ends at byte ", data_at_ + at,
                           t.begin < at ? "" : " (a gap)"));
    at = t.end;
  }
  if (at != data_bytes_)
    throw fail(text::cat("its tensors end at byte ", data_at_ + at, ", but the file ",
                         at > data_bytes_ ? "ends at byte " : "goes on to byte ", data_at_ + data_bytes_,
                         at > data_bytes_ ? " (truncated)" : " (bytes that no tensor owns)"));
}

STRATA_DECL void write(const std::filesystem::path& path, const std::vector<tensor_to_write>& tensors,
                       const std::map<std::string, std::string>& metadata, const tensor_source& source) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t at = 0;
  for (const tensor_to_write& t : tensors) {
    const std::uint64_t bytes = t.elements() * size_of(t.type);
    header[t.name] = {{"dtype", name_of(t.type)}, {"shape", t.shape}, {"data_offsets", {at, at + bytes}}};
    at += bytes;
  }
  std::string text_header = header.dump();
  text_header.append((8 - text_header.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  const std::uint64_t header_bytes = text_header.size();

  strata::ckpt::detail::write_atomically(
      path,
      [&](const strata::ckpt::detail::byte_sink& put) {
        put(std::as_bytes(std::span(&header_bytes, 1)));
        put(std::as_bytes(std::span(text_header)));
        std::vector<float> values;
        std::vector<std::byte> encoded;
        for (std::size_t k = 0; k < tensors.size(); ++k) {
          const tensor_to_write& t = tensors[k];
          for (std::uint64_t first = 0; first < t.elements(); first += detail::piece_elements) {
            const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(detail::piece_elements, t.elements() - first));
            values.resize(n);
            source(k, first, values);
            encoded.resize(n * size_of(t.type));
            detail::encode(t.type, values, encoded.data());
            put(encoded);
          }
        }
      },
      "", " (the disk is full)");
}

}  // namespace strata::ckpt::safetensors
