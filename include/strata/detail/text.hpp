#pragma once
// Quoting user input in error messages: whole UTF-8 characters only, and a bounded excerpt of
// long input (a 100 kB strategy string or environment value is not echoed back whole).
#include <cstddef>
#include <string>
#include <string_view>

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

}  // namespace strata::detail
