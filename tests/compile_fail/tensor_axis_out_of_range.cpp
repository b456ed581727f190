// The axis is checked against the rank of the declared variable.
// expect: TensorAxisInRange
// expect: TensorParallel<1>
#include <vector>
#include "strata/model/variable.hpp"
void declare(std::vector<float>& w, std::vector<float>& g) {
  using S = strata::Strategy<strata::TensorParallel<1>>;
  auto v = strata::variable<S>("bias", w, g, {4});
}
