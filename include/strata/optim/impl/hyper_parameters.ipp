#pragma once
// Hyper-parameters as text: compiled in every translation unit when strata is header-only, once under
// STRATA_SEPARATE_COMPILATION (see config.hpp).
#include <charconv>
#include <cmath>

#include "strata/optim/hyper_parameters.hpp"

namespace strata::optim {

STRATA_DECL std::string hyper_parameter::value_text() const {
  char text[32];
  return {text, std::to_chars(text, text + sizeof text, value).ptr};
}

STRATA_DECL std::string hyper_parameter::range() const {
  auto number = [](double x) {
    if (std::isinf(x)) return std::string("inf");
    std::string text = std::to_string(x);
    text.erase(text.find_last_not_of('0') + 1);  // 1.000000 -> 1.
    if (text.back() == '.') text.pop_back();
    return text;
  };
  return (low_open ? "(" : "[") + number(low) + ", " + number(high) + (high_open || std::isinf(high) ? ")" : "]");
}

}  // namespace strata::optim
