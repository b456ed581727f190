// The axis is checked against the rank of the declared variable.
// expect: PartitionAxisInRange
// expect: Partition<2>
#include <vector>
#include "strata/model/variable.hpp"
void declare(std::vector<float>& w, std::vector<float>& g) {
  using S = strata::Strategy<strata::Partition<2>>;
  auto v = strata::variable<S>("w", w, g, {4, 4});
}
