// Comparing tensors in tests: values on any device, in any dtype, as float64 on the host, with
// a message that names the first element out of tolerance (index, both values) or the shapes.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "ferry/core/tensor.h"

namespace ferry::testing {

// Success when a and b have the same sizes and |a - b| <= atol + rtol * |b| everywhere (NaN
// equals NaN).
::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double rtol = 1e-5,
                                     double atol = 1e-8);

// Whether every |a_i - b_i| <= tol * max_j |b_j|: closeness at the scale of the whole tensor, for
// values summed in different orders (a deep network's gradients) where small elements carry the
// rounding of large ones. The failure names the worst element and the scale.
::testing::AssertionResult close_at_scale(const Tensor& a, const Tensor& b, double tol);

// A float64 host copy of t's values, flattened (row-major).
std::vector<double> values_of(const Tensor& t);

}  // namespace ferry::testing

#define EXPECT_ALL_CLOSE(a, b, ...) \
  EXPECT_TRUE(::ferry::testing::all_close((a), (b), ##__VA_ARGS__))
