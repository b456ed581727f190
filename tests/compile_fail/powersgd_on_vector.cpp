// expect: PowerSGDNeedsMatrix
// expect: PowerSGD<2>
#include <vector>
#include "strata/model/variable.hpp"
void declare(std::vector<float>& b, std::vector<float>& g) {
  using S = strata::Strategy<strata::Compress<strata::PowerSGD<2>>>;
  auto v = strata::variable<S>("fc.bias", b, g, {256});
}
