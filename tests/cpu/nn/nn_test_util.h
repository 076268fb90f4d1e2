// Helpers of the compute-kernel tests: random operands in several layouts (contiguous,
// channels-last, transposed, sliced), float64 copies, tolerant comparisons, inner products for
// the adjoint identity and central finite differences.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ferry/core/generator.h"
#include "ferry/core/tensor.h"
#include "ferry/ops/factories.h"
#include "tests/support/errors.h"
#include "tests/support/random.h"

namespace ferry::testing::nn {

enum class Layout { kContiguous, kChannelsLast, kTransposed, kSliced };

inline const char* layout_name(Layout l) {
  switch (l) {
    case Layout::kContiguous:
      return "contiguous";
    case Layout::kChannelsLast:
      return "channels-last";
    case Layout::kTransposed:
      return "transposed";
    case Layout::kSliced:
      return "sliced";
  }
  return "?";
}

// A tensor of `sizes` whose memory is laid out as `layout` asks (channels-last needs 4-d;
// transposed reverses the memory order of all dims; sliced takes every other element of a
// wider last dim and starts at an offset).
inline Tensor empty_in(IntArrayRef sizes, ScalarType dtype, Layout layout) {
  const int64_t rank = static_cast<int64_t>(sizes.size());
  switch (layout) {
    case Layout::kContiguous:
      return empty(sizes, dtype);
    case Layout::kChannelsLast:
      return rank == 4
                 ? empty(sizes, TensorOptions(dtype).memory_format(MemoryFormat::ChannelsLast))
                 : empty(sizes, dtype);
    case Layout::kTransposed: {
      std::vector<int64_t> reversed(sizes.begin(), sizes.end()), perm(sizes.size());
      std::reverse(reversed.begin(), reversed.end());
      for (int64_t d = 0; d < rank; ++d) perm[d] = rank - 1 - d;
      return empty(reversed, dtype).permute(perm);
    }
    case Layout::kSliced: {
      if (rank == 0) return empty(sizes, dtype);
      std::vector<int64_t> wide(sizes.begin(), sizes.end());
      wide.back() = 2 * wide.back() + 1;
      return empty(wide, dtype).slice(rank - 1, 1, wide.back(), 2);
    }
  }
  return Tensor();
}

// Standard normal values (times `scale`) in `layout`.
inline Tensor random_in(IntArrayRef sizes, ScalarType dtype, Layout layout, Generator& gen,
                        double scale = 1.0) {
  Tensor t = empty_in(sizes, dtype, layout);
  Tensor values = randn(sizes, kFloat64, &gen);
  if (scale != 1.0) {
    double* p = values.data_ptr<double>();
    for (int64_t i = 0; i < values.numel(); ++i) p[i] *= scale;
  }
  t.copy_(values);
  return t;
}

// An output filled with NaN, so that an element the kernel forgets shows up.
inline Tensor nan_in(IntArrayRef sizes, ScalarType dtype, Layout layout) {
  Tensor t = empty_in(sizes, dtype, layout);
  t.fill_(std::nan(""));
  return t;
}

inline Tensor f64(const Tensor& t) {
  return t.defined() ? t.to(kFloat64, false, true).contiguous() : t;
}

inline std::vector<double> values(const Tensor& t) {
  const Tensor c = f64(t);
  const double* p = c.data_ptr<double>();
  return std::vector<double>(p, p + c.numel());
}

inline double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : values(t)) m = std::max(m, std::fabs(v));
  return m;
}

// Largest |got - want| over max(1, max |want|); NaNs count as infinitely far unless both are NaN.
inline double scaled_error(const Tensor& got, const Tensor& want) {
  const auto g = values(got), w = values(want);
  if (g.size() != w.size()) return INFINITY;
  double err = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) && std::isnan(w[i])) continue;
    const double d = std::fabs(g[i] - w[i]);
    err = std::max(err, std::isnan(d) ? INFINITY : d);
  }
  return err / std::max(1.0, max_abs(want));
}

// Tolerances relative to the result's scale: float32 accumulates in float32, the 16-bit types
// round their inputs and outputs.
inline double tolerance(ScalarType dtype) {
  switch (dtype) {
    case kFloat64:
      return 1e-12;
    case kFloat32:
      return 2e-5;
    case kFloat16:
      return 4e-3;
    case kBFloat16:
      return 3e-2;
    default:
      return 0;
  }
}

#define FERRY_EXPECT_CLOSE(got, want, dtype, what)                                                 \
  EXPECT_LE(::ferry::testing::nn::scaled_error(got, want), ::ferry::testing::nn::tolerance(dtype)) \
      << (what) << " (" << (dtype) << ")"

inline double dot(const Tensor& a, const Tensor& b) {
  const auto x = values(a), y = values(b);
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

// x + h * v (float64, contiguous).
inline Tensor axpy(const Tensor& x, double h, const Tensor& v) {
  Tensor out = f64(x).clone();
  const auto dv = values(v);
  double* p = out.data_ptr<double>();
  for (int64_t i = 0; i < out.numel(); ++i) p[i] += h * dv[static_cast<size_t>(i)];
  return out;
}

// <g, (f(x + h v) - f(x - h v)) / 2h>: the directional derivative of <g, f> along v.
inline double fd_directional(const std::function<Tensor(const Tensor&)>& f, const Tensor& x,
                             const Tensor& v, const Tensor& g, double h = 1e-6) {
  return (dot(g, f(axpy(x, h, v))) - dot(g, f(axpy(x, -h, v)))) / (2 * h);
}

inline bool near_rel(double a, double b, double tol) {
  return std::fabs(a - b) <= tol * std::max({1.0, std::fabs(a), std::fabs(b)});
}

inline ScalarType kReducedAndF32[] = {kFloat32, kBFloat16, kFloat16};

}  // namespace ferry::testing::nn
