// Helpers of the nn operator tests: seeded random tensors, tensors from values, gradcheck with a
// readable failure, and running a function of tensors on a device with results brought back to
// the host (to compare CPU and sim).
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ferry/autograd/engine.h"
#include "ferry/autograd/grad_mode.h"
#include "ferry/autograd/gradcheck.h"
#include "ferry/ferry.h"
#include "tests/support/errors.h"
#include "tests/support/random.h"
#include "tests/support/tensor_compare.h"

namespace ferry::testing {

// Uniform in [lo, hi), float64 on the host, from the test's seeded stream, then converted.
inline Tensor uniform(std::mt19937_64& rng, IntArrayRef sizes, ScalarType dtype = kFloat64,
                      double lo = -1.0, double hi = 1.0) {
  Tensor t = empty(sizes, TensorOptions(kFloat64));
  std::uniform_real_distribution<double> dist(lo, hi);
  double* p = t.data_ptr<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return dtype == kFloat64 ? t : t.to(dtype);
}

// A float64 (or `dtype`) host tensor of `sizes` holding `values` in row-major order.
inline Tensor tensor_of(const std::vector<double>& values, IntArrayRef sizes,
                        ScalarType dtype = kFloat64) {
  Tensor t = empty(sizes, TensorOptions(kFloat64));
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  std::copy(values.begin(), values.end(), t.data_ptr<double>());
  return dtype == kFloat64 ? t : t.to(dtype);
}

// int64 targets/indices uniform in [0, high).
inline Tensor indices_of(std::mt19937_64& rng, IntArrayRef sizes, int64_t high) {
  Tensor t = empty(sizes, TensorOptions(kInt64));
  std::uniform_int_distribution<int64_t> dist(0, high - 1);
  int64_t* p = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

using Fn = std::function<autograd::variable_list(const autograd::variable_list&)>;

// gradcheck over `inputs` (those that should be checked must require grad).
inline ::testing::AssertionResult grad_ok(const Fn& fn, const autograd::variable_list& inputs,
                                          autograd::GradcheckOptions options = {}) {
  const autograd::GradcheckResult r = autograd::gradcheck(fn, inputs, options);
  if (r.ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << r.message;
}

// A leaf copy of t that requires grad.
inline Tensor leaf(const Tensor& t) { return t.detach().clone().requires_grad_(); }

// Runs `fn` on copies of `inputs` moved to `device` (leaves that require grad where the inputs
// do); returns the outputs and then the inputs' gradients of sum(output_k * weight_k) over all
// outputs (weights: fixed pseudo-random host tensors), all as host float64 tensors.
inline std::vector<Tensor> values_and_grads(const Fn& fn, const autograd::variable_list& inputs,
                                            const Device& device, uint64_t weight_seed) {
  autograd::variable_list moved;
  for (const Tensor& t : inputs) {
    if (!t.defined()) {
      moved.emplace_back();
      continue;
    }
    Tensor m = t.detach().to(device);
    if (t.requires_grad()) m.requires_grad_();
    moved.push_back(m);
  }
  const autograd::variable_list outs = fn(moved);
  std::vector<Tensor> result;
  Tensor total;
  std::mt19937_64 rng(weight_seed);
  for (const Tensor& o : outs) {
    result.push_back(o.detach().to(Device(DeviceType::CPU), kFloat64));
    if (!o.requires_grad()) continue;
    const Tensor w = uniform(rng, o.sizes(), o.dtype()).to(device);
    const Tensor term = (o * w).sum();
    total = total.defined() ? total + term : term;
  }
  if (total.defined()) {
    autograd::variable_list wrt;
    for (const Tensor& m : moved) {
      if (m.defined() && m.requires_grad()) wrt.push_back(m);
    }
    const autograd::variable_list grads = autograd::grad({total}, wrt, {}, std::nullopt, false,
                                                         /*allow_unused=*/true);
    for (const Tensor& g : grads) {
      result.push_back(g.defined() ? g.to(Device(DeviceType::CPU), kFloat64) : Tensor());
    }
  }
  return result;
}

// values_and_grads on the CPU and on `device` agree within the tolerances.
inline void expect_same_on(const Device& device, const Fn& fn,
                           const autograd::variable_list& inputs, double rtol = 1e-6,
                           double atol = 1e-9) {
  const std::vector<Tensor> cpu = values_and_grads(fn, inputs, Device(DeviceType::CPU), 7);
  const std::vector<Tensor> dev = values_and_grads(fn, inputs, device, 7);
  ASSERT_EQ(cpu.size(), dev.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    SCOPED_TRACE("result " + std::to_string(i));
    ASSERT_EQ(cpu[i].defined(), dev[i].defined());
    if (cpu[i].defined()) {
      EXPECT_ALL_CLOSE(dev[i], cpu[i], rtol, atol);
    }
  }
}

}  // namespace ferry::testing
