// all_close and values_of.
#include "tests/support/tensor_compare.h"

#include <algorithm>
#include <cmath>
#include <optional>
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

namespace {

// Why a and b cannot be compared element by element (undefined, or sizes that differ), if so.
std::optional<::testing::AssertionResult> not_comparable(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) {
    return ::testing::AssertionFailure()
           << "undefined tensor (a " << a.defined() << ", b " << b.defined() << ")";
  }
  if (!a.sizes().equals(b.sizes())) {
    return ::testing::AssertionFailure() << "sizes differ: " << a.sizes() << " vs " << b.sizes();
  }
  return std::nullopt;
}

}  // namespace

::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (auto failure = not_comparable(a, b)) return *failure;
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

::testing::AssertionResult close_at_scale(const Tensor& a, const Tensor& b, double tol) {
  if (auto failure = not_comparable(a, b)) return *failure;
  const std::vector<double> x = values_of(a), y = values_of(b);
  double scale = 0;
  for (double v : y) scale = std::max(scale, std::abs(v));
  size_t worst = 0;
  double worst_error = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double error = std::abs(x[i] - y[i]);
    if (!(error <= worst_error)) {  // NaN counts as the worst
      worst = i;
      worst_error = error;
    }
  }
  if (worst_error <= tol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "element " << worst << " (of " << x.size() << ", sizes " << a.sizes()
         << "): " << x[worst] << " vs " << y[worst] << ", error " << worst_error << " > " << tol
         << " x max |expected| " << scale;
}

}  // namespace ferry::testing
