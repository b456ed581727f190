#pragma once
// Quoting user input in error messages: whole UTF-8 characters only, and a bounded excerpt of
// long input (a 100 kB strategy string or environment value is not echoed back whole). And
// building messages without fmt, for the headers that nvcc compiles too (nvcc cannot compile
// fmt): cat, join, hex, shortest, zero_padded.
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>

namespace strata::detail {

/// Bytes of the UTF-8 character that starts with `lead` (1 for a stray continuation byte or
/// an invalid lead, so that a damaged string is still walked byte by byte).
constexpr std::size_t utf8_length(unsigned char lead) {
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  return 1;
}

/// The character of `text` that starts at byte `at`, whole (shorter only where the text ends).
constexpr std::string_view character_at(std::string_view text, std::size_t at) {
  return text.substr(at, utf8_length(static_cast<unsigned char>(text[at])));
}

/// `text` itself when it has at most `max_bytes`; otherwise its first whole characters within
/// `max_bytes`, then "... (N bytes)".
inline std::string excerpt(std::string_view text, std::size_t max_bytes = 64) {
  if (text.size() <= max_bytes) return std::string(text);
  std::size_t end = 0;
  while (end < text.size()) {
    const std::size_t next = end + character_at(text, end).size();
    if (next > max_bytes) break;
    end = next;
  }
  return std::string(text.substr(0, end)) + "... (" + std::to_string(text.size()) + " bytes)";
}

/// Appends one part of a message: text as it is, a character, a number as fmt's "{}" writes
/// integers (std::to_string's form).
inline void append(std::string& out, std::string_view text) { out += text; }
inline void append(std::string& out, char c) { out += c; }
template <class T>
  requires std::is_arithmetic_v<T> && (!std::is_same_v<T, char>)
void append(std::string& out, T number) {
  out += std::to_string(number);
}

/// The parts written one after another: cat("rank ", 3, " of ", 4) is "rank 3 of 4".
template <class... Parts>
std::string cat(const Parts&... parts) {
  std::string out;
  (append(out, parts), ...);
  return out;
}

/// The elements of `range` with `separator` between them.
template <class Range>
std::string join(const Range& range, std::string_view separator) {
  std::string out;
  for (const auto& x : range) {
    if (!out.empty()) out += separator;
    append(out, x);
  }
  return out;
}

/// `value` as 16 lowercase hexadecimal digits.
inline std::string hex(std::uint64_t value) {
  char digits[17];
  std::snprintf(digits, sizeof digits, "%016llx", static_cast<unsigned long long>(value));
  return digits;
}

/// `value` in the shortest decimal form that reads back as it, as fmt's "{}" writes it:
/// without an exponent from 1e-4 up to 1e16 (0.3, 1000000000000), with one beyond (1e+20).
inline std::string shortest(double value) {
  char digits[64];  // a fixed form below 1e16 and a shortest one are both far shorter
  const double magnitude = value < 0 ? -value : value;
  const bool fixed = magnitude >= 1e-4 && magnitude < 1e16;
  const auto end = fixed ? std::to_chars(digits, digits + sizeof digits, value, std::chars_format::fixed).ptr
                         : std::to_chars(digits, digits + sizeof digits, value).ptr;
  return {digits, end};
}

/// `value` in decimal, padded with zeros to at least `width` characters (the sign included).
inline std::string zero_padded(long long value, int width) {
  char digits[32];
  std::snprintf(digits, sizeof digits, "%0*lld", width, value);
  return digits;
}

}  // namespace strata::detail
