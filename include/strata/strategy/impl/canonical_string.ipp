#pragma once
// Printing and parsing strategy strings: compiled in every translation unit when strata is
// header-only, once under STRATA_SEPARATE_COMPILATION (see config.hpp).
#include <cctype>
#include <charconv>

#include "strata/strategy/canonical_string.hpp"

namespace strata {

namespace detail {

inline std::string_view collective_name(collective_kind c) {
  switch (c) {
    case collective_kind::native: return "Native";
    case collective_kind::ring: return "Ring";
    case collective_kind::tree: return "Tree";
    case collective_kind::hierarchical: return "Hierarchical";
    case collective_kind::none: break;
  }
  return "None";
}

inline std::string codec_name(const strategy_descriptor& d) {
  switch (d.codec) {
    case codec_kind::fp16: return "FP16";
    case codec_kind::bf16: return "BF16";
    case codec_kind::topk: return fmt::format("TopK<{}>", d.topk_ratio);
    case codec_kind::powersgd: return fmt::format("PowerSGD<{}>", d.powersgd_rank);
    case codec_kind::none: break;
  }
  return "None";
}

/// A small recursive-descent reader over a strategy string that remembers where it is, so
/// every error can say what it expected at which column.
class strategy_reader {
 public:
  explicit strategy_reader(std::string_view text) : text_(text) {}

  strategy_descriptor read() {
    strategy_descriptor d;
    skip_space();
    if (at_end()) fail("expected a policy, found the end of the string");
    for (;;) {
      read_policy(d);
      skip_space();
      if (at_end()) break;
      expect(',');
    }
    check_rules(d);
    return d;
  }

 private:
  // Which categories were given, and where, to report duplicates.
  struct seen_category {
    std::string_view category;
    std::size_t column = npos;
  };
  static constexpr std::size_t npos = std::string_view::npos;

  [[noreturn]] void fail(const std::string& what) const { throw strategy_parse_error(text_, pos_, what); }
  /// Fails at the column where `name` (a view into the text) starts.
  [[noreturn]] void fail_at(std::string_view name, const std::string& what) const {
    throw strategy_parse_error(text_, static_cast<std::size_t>(name.data() - text_.data()), what);
  }
  bool at_end() const { return pos_ >= text_.size(); }
  void skip_space() {
    while (!at_end() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  std::string found() const { return at_end() ? "the end of the string" : fmt::format("'{}'", detail::character_at(text_, pos_)); }
  void expect(char c) {
    skip_space();
    if (at_end() || text_[pos_] != c) fail(fmt::format("expected '{}', found {}", c, found()));
    ++pos_;
  }
  bool accept(char c) {
    skip_space();
    if (!at_end() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  std::string_view identifier() {
    skip_space();
    std::size_t begin = pos_;
    while (!at_end() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
    if (begin == pos_) fail(fmt::format("expected a name, found {}", found()));
    return text_.substr(begin, pos_ - begin);
  }
  template <class Number>
  Number number() {
    skip_space();
    Number value{};
    auto [end, error] = std::from_chars(text_.data() + pos_, text_.data() + text_.size(), value);
    if (error != std::errc{}) fail(fmt::format("expected a number, found {}", found()));
    pos_ = static_cast<std::size_t>(end - text_.data());
    return value;
  }
  /// Reads a number and checks it, reporting a bad value at its own column.
  template <class Number, class Valid>
  Number checked_number(Valid valid, std::string_view requirement) {
    skip_space();
    const std::size_t column = pos_;
    const Number n = number<Number>();
    if (!valid(n)) {
      pos_ = column;
      fail(std::string(requirement));
    }
    return n;
  }
  template <class Number, class Valid>
  Number bracketed_number(Valid valid, std::string_view requirement) {
    expect('<');
    const Number n = checked_number<Number>(valid, requirement);
    expect('>');
    return n;
  }

  void claim(std::string_view category, std::size_t column) {
    for (auto& s : seen_)
      if (s.category == category) {
        if (s.column != npos)
          throw strategy_parse_error(text_, column,
                                     fmt::format("a second {} policy; the first is at column {}", category, s.column + 1));
        s.column = column;
        return;
      }
  }

  void read_policy(strategy_descriptor& d) {
    skip_space();
    const std::size_t column = pos_;
    const std::string_view name = identifier();
    if (name == "Replicate") {
      claim("placement", column);
      d.placement = placement_kind::replicate;
    } else if (name == "PS") {
      claim("placement", column);
      d.placement = placement_kind::ps;
      d.ps_shards = bracketed_number<int>([](int n) { return n >= 1; }, "PS<N>: N must be at least 1");
    } else if (name == "Partition") {
      claim("partition", column);
      read_partition(d);
    } else if (name == "AllReduce") {
      claim("collective", column);
      read_collective(d);
    } else if (name == "Compress") {
      claim("compression", column);
      expect('<');
      read_codec(identifier(), d);
      if (accept(',')) read_feedback(identifier(), d);
      expect('>');
    } else if (name == "Consistency") {
      claim("consistency", column);
      expect('<');
      read_consistency(identifier(), d);
      expect('>');
    } else if (name == "TensorParallel") {
      claim("tensor", column);
      d.tensor_axis = bracketed_number<int>([](int a) { return a >= 0; }, "TensorParallel<Axis>: Axis must be non-negative");
    } else if (name == "WholeTensor") {
      claim("tensor", column);
      d.tensor_axis = -1;
    } else if (name == "SparseRows" || name == "DenseGradient") {
      claim("gradient", column);
      d.sparse_rows = name == "SparseRows";
    } else if (is_codec(name)) {
      claim("compression", column);
      read_codec(name, d);
      if (accept('+')) read_feedback(identifier(), d);
    } else if (is_consistency(name)) {
      claim("consistency", column);
      read_consistency(name, d);
    } else {
      fail_at(name, fmt::format("expected a policy (Replicate, PS<N>, Partition<Axis>, AllReduce<Algorithm>, FP16, BF16, "
                       "TopK<Ratio>, PowerSGD<Rank>, BSP, ASP, SSP<S>, SparseRows, TensorParallel<Axis>), found '{}'",
                       name));
    }
  }

  void read_partition(strategy_descriptor& d) {
    expect('<');
    d.partition_axis = checked_number<int>([](int a) { return a >= 0; }, "Partition<Axis>: Axis must be non-negative");
    if (accept(','))
      d.partition_shards = checked_number<int>([](int n) { return n == 0 || n >= 2; },
                                               "Partition<Axis, Shards>: Shards must be at least 2 (or 0 for automatic)");
    expect('>');
  }

  void read_collective(strategy_descriptor& d) {
    expect('<');
    const std::string_view algorithm = identifier();
    for (auto c : {collective_kind::native, collective_kind::ring, collective_kind::tree, collective_kind::hierarchical})
      if (algorithm == collective_name(c)) {
        d.collective = c;
        expect('>');
        return;
      }
    fail_at(algorithm, fmt::format("expected an all-reduce algorithm (Ring, Tree, Hierarchical, Native), found '{}'", algorithm));
  }

  static bool is_codec(std::string_view n) {
    return n == "None" || n == "FP16" || n == "BF16" || n == "TopK" || n == "PowerSGD";
  }
  static bool is_consistency(std::string_view n) { return n == "BSP" || n == "ASP" || n == "SSP"; }

  void read_codec(std::string_view name, strategy_descriptor& d) {
    if (name == "None") d.codec = codec_kind::none;
    else if (name == "FP16") d.codec = codec_kind::fp16;
    else if (name == "BF16") d.codec = codec_kind::bf16;
    else if (name == "TopK") {
      d.codec = codec_kind::topk;
      d.topk_ratio =
          bracketed_number<double>([](double r) { return r > 0.0 && r <= 1.0; }, "TopK<Ratio>: Ratio must lie in (0, 1]");
    } else if (name == "PowerSGD") {
      d.codec = codec_kind::powersgd;
      d.powersgd_rank = bracketed_number<int>([](int r) { return r >= 1; }, "PowerSGD<Rank>: Rank must be at least 1");
    } else
      fail_at(name, fmt::format("expected a codec (None, FP16, BF16, TopK<Ratio>, PowerSGD<Rank>), found '{}'", name));
  }

  void read_feedback(std::string_view name, strategy_descriptor& d) {
    if (name == "ErrorFeedback") d.error_feedback = true;
    else if (name != "NoFeedback") fail_at(name, fmt::format("expected ErrorFeedback or NoFeedback, found '{}'", name));
    if (d.error_feedback && d.codec == codec_kind::none)
      fail_at(name, "Compress<None, ErrorFeedback>: an uncompressed gradient loses nothing to feed back");
  }

  void read_consistency(std::string_view name, strategy_descriptor& d) {
    if (name == "BSP") d.consistency = consistency_kind::bsp;
    else if (name == "ASP") d.consistency = consistency_kind::asp;
    else if (name == "SSP") {
      d.consistency = consistency_kind::ssp;
      d.staleness = bracketed_number<int>([](int n) { return n >= 1; }, "SSP<S>: S must be at least 1 (SSP<0> is BSP)");
    } else
      fail_at(name, fmt::format("expected a consistency model (BSP, ASP, SSP<S>), found '{}'", name));
  }

  /// Fills the category defaults the string left out, applies the combination rules and
  /// writes the result in its canonical form.
  void check_rules(strategy_descriptor& d) const {
    if (seen_[2].column == npos)  // collective not given: default by placement
      d.collective = d.placement == placement_kind::replicate ? collective_kind::native : collective_kind::none;
    if (const rules::checked_rule* broken = rules::first_broken(d))
      throw strategy_parse_error(text_, 0, fmt::format("breaks rule {}: {}", broken->name, broken->message));
    d = canonical_form(d);
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  seen_category seen_[7] = {{"placement"}, {"partition"}, {"collective"}, {"compression"},
                            {"consistency"}, {"gradient"},  {"tensor"}};
};

}  // namespace detail

STRATA_DECL std::string to_string(const strategy_descriptor& d) {
  std::string out = d.placement == placement_kind::ps ? fmt::format("PS<{}>", d.ps_shards) : std::string("Replicate");
  if (d.partitioned())
    out += d.partition_shards == 0 ? fmt::format(",Partition<{}>", d.partition_axis)
                                   : fmt::format(",Partition<{},{}>", d.partition_axis, d.partition_shards);
  if (d.tensor_parallel()) out += fmt::format(",TensorParallel<{}>", d.tensor_axis);
  if (d.collective != collective_kind::none && d.collective != collective_kind::native)
    out += fmt::format(",AllReduce<{}>", detail::collective_name(d.collective));
  if (d.codec != codec_kind::none) out += "," + detail::codec_name(d) + (d.error_feedback ? "+ErrorFeedback" : "");
  if (d.consistency == consistency_kind::asp) out += ",ASP";
  if (d.consistency == consistency_kind::ssp) out += fmt::format(",SSP<{}>", d.staleness);
  if (d.sparse_rows) out += ",SparseRows";
  return out;
}

STRATA_DECL strategy_descriptor parse_strategy(std::string_view text) { return detail::strategy_reader(text).read(); }

}  // namespace strata
