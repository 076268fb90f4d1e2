// all_close and values_of.
#include "tests/support/tensor_compare.h"

#include <cmath>
#include <sstream>

#include "ferry/autograd/grad_mode.h"
#include "ferry/ops/factories.h"

namespace ferry::testing {

std::vector<double> values_of(const Tensor& t) {
  NoGradGuard no_grad;
  const Tensor host = t.detach().to(Device(DeviceType::CPU), kFloat64).contiguous();
  const double* p = host.data_ptr<double>();
  return std::vector<double>(p, p + host.numel());
}

::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (!a.defined() || !b.defined()) {
    return ::testing::AssertionFailure()
           << "undefined tensor (a " << a.defined() << ", b " << b.defined() << ")";
  }
  if (!a.sizes().equals(b.sizes())) {
    return ::testing::AssertionFailure() << "sizes differ: " << a.sizes() << " vs " << b.sizes();
  }
  const std::vector<double> x = values_of(a), y = values_of(b);
  for (size_t i = 0; i < x.size(); ++i) {
    const bool both_nan = std::isnan(x[i]) && std::isnan(y[i]);
    if (both_nan || x[i] == y[i]) continue;
    if (!(std::abs(x[i] - y[i]) <= atol + rtol * std::abs(y[i]))) {
      return ::testing::AssertionFailure()
             << "element " << i << " (of " << x.size() << ", sizes " << a.sizes() << "): " << x[i]
             << " vs " << y[i] << " (rtol " << rtol << ", atol " << atol << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace ferry::testing
