// libFuzzer target for the strategy-string parser: any input either parses or throws
// strategy_parse_error (nothing else, no crash, no sanitizer report), and whatever parses
// round-trips through its canonical string.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "strata/strategy/canonical_string.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  strata::strategy_descriptor parsed;
  try {
    parsed = strata::parse_strategy(text);
  } catch (const strata::strategy_parse_error& e) {
    if (e.column() > text.size()) std::abort();  // an error must point into the text
    return 0;
  }
  const std::string canonical = strata::to_string(parsed);
  if (!(strata::parse_strategy(canonical) == parsed) || strata::to_string(strata::parse_strategy(canonical)) != canonical)
    std::abort();
  return 0;
}
