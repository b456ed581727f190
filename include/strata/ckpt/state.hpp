#pragma once
// What a checkpoint holds, as the parts of strata that own state describe it: named float32
// tensors with their full logical shape and how they are shared among ranks. Saving writes
// them; restoring fills the same spans, whatever the world size or partitioning was when
// they were saved.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace strata::ckpt {

enum class sharing {
  /// The same on every rank (parameters, optimizer state of data-parallel variables):
  /// saved as one slice per rank, in parallel; every rank restores the whole tensor.
  replicated,
  /// A range of the tensor that this rank owns (a parameter-server shard: its values and
  /// optimizer state): saved as it is; restored from whichever saved slices intersect the
  /// range, so a tensor saved replicated, or sharded differently, restores into it.
  sharded,
  /// Each rank's own, meaningful as a sum over ranks (error-feedback residuals): restored
  /// unchanged into the same world size; into another, rank r receives the sum of what the
  /// old ranks q with q mod new_size == r held, so the total carried forward is preserved.
  rank_local,
};

struct tensor_state {
  std::string name;
  std::vector<std::size_t> shape;  // full logical shape
  sharing how = sharing::replicated;
  std::span<float> data;  ///< the whole tensor; sharded: elements [begin, begin + data.size())
  /// Absent from a checkpoint is acceptable: the owner keeps its fresh value (PowerSGD's
  /// warm start, whose layout depends on the partitioning).
  bool optional = false;
  std::size_t begin = 0;  ///< sharded only
  /// How many ranks hold these same values, and which of them this one is, when that is not
  /// "every rank" (replicated) or "this rank alone" (sharded): e.g. the ranks of one mesh
  /// stage. Each saves an even part, so the values are written once. 0: the default.
  int holders = 0;
  int holder = 0;
};

/// The tensors of one executor, plus what must happen after they were filled.
class state_set {
 public:
  void add(tensor_state t) { tensors_.push_back(std::move(t)); }
  void add_all(std::span<const tensor_state> more) { tensors_.insert(tensors_.end(), more.begin(), more.end()); }

  /// A zeroed buffer that lives as long as the set: for state kept in another layout (a
  /// bucket's residual), copied out before a save and back by an after_restore hook.
  std::span<float> scratch(std::size_t elements) {
    return *scratch_.emplace_back(std::make_unique<std::vector<float>>(elements, 0.0f));
  }
  void after_restore(std::function<void()> hook) { hooks_.push_back(std::move(hook)); }

  std::span<const tensor_state> tensors() const { return tensors_; }
  /// Replaces every tensor t by what `f(t)` returns (a std::vector<tensor_state>): how an
  /// executor on a mesh says where its parts lie in the whole model.
  template <class F>
  void replace_tensors(F&& f) {
    std::vector<tensor_state> out;
    for (const tensor_state& t : tensors_)
      for (tensor_state& part : f(t)) out.push_back(std::move(part));
    tensors_ = std::move(out);
  }
  void restored() const {
    for (const auto& hook : hooks_) hook();
  }

 private:
  std::vector<tensor_state> tensors_;
  std::vector<std::unique_ptr<std::vector<float>>> scratch_;
  std::vector<std::function<void()>> hooks_;
};

/// The name of the first tensor of `set` holding a NaN or an infinity, or "": a diverged
/// model is not saved, since resuming from it would only diverge again.
inline std::string first_nonfinite(const state_set& set) {
  for (const tensor_state& t : set.tensors())
    if (!std::all_of(t.data.begin(), t.data.end(), [](float x) { return std::isfinite(x); })) return t.name;
  return {};
}

}  // namespace strata::ckpt
