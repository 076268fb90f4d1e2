// conv2d, max/avg/adaptive pooling: values against float64 references written from the
// definitions (PyTorch's output sizes, ceil_mode, count_include_pad, divisor_override, adaptive
// windows), every floating dtype, channels-last and non-contiguous inputs, gradcheck with
// stride/padding/dilation/groups, the double backwards, and the errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tests/nn/nn_ops_test_util.h"

namespace ferry::testing {
namespace {

using autograd::variable_list;
using ::testing::HasSubstr;

struct ConvCase {
  int64_t n, c, h, w, o, kh, kw;
  int64_t sh, sw, ph, pw, dh, dw, groups;
};

std::string describe(const ConvCase& k) {
  return ::testing::PrintToString(std::vector<int64_t>{k.n, k.c, k.h, k.w, k.o, k.kh, k.kw, k.sh,
                                                       k.sw, k.ph, k.pw, k.dh, k.dw, k.groups});
}

Tensor ref_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const ConvCase& k) {
  const int64_t oh = (k.h + 2 * k.ph - k.dh * (k.kh - 1) - 1) / k.sh + 1;
  const int64_t ow = (k.w + 2 * k.pw - k.dw * (k.kw - 1) - 1) / k.sw + 1;
  const std::vector<double> vx = values_of(x), vw = values_of(w);
  const std::vector<double> vb = b.defined() ? values_of(b) : std::vector<double>(k.o, 0.0);
  const int64_t cg = k.c / k.groups, og = k.o / k.groups;
  std::vector<double> out(static_cast<size_t>(k.n * k.o * oh * ow));
  for (int64_t n = 0; n < k.n; ++n) {
    for (int64_t o = 0; o < k.o; ++o) {
      const int64_t g = o / og;
      for (int64_t y = 0; y < oh; ++y) {
        for (int64_t z = 0; z < ow; ++z) {
          double acc = vb[o];
          for (int64_t c = 0; c < cg; ++c) {
            for (int64_t i = 0; i < k.kh; ++i) {
              for (int64_t j = 0; j < k.kw; ++j) {
                const int64_t ih = y * k.sh - k.ph + i * k.dh, iw = z * k.sw - k.pw + j * k.dw;
                if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
                acc += vx[((n * k.c + g * cg + c) * k.h + ih) * k.w + iw] *
                       vw[((o * cg + c) * k.kh + i) * k.kw + j];
              }
            }
          }
          out[((n * k.o + o) * oh + y) * ow + z] = acc;
        }
      }
    }
  }
  return tensor_of(out, {k.n, k.o, oh, ow});
}

const std::vector<ConvCase> kConvCases = {
    {2, 3, 5, 6, 4, 3, 3, 1, 1, 0, 0, 1, 1, 1},  // plain
    {1, 4, 7, 6, 6, 3, 2, 2, 1, 1, 0, 1, 2, 2},  // stride, padding, dilation, groups
    {2, 4, 6, 6, 4, 3, 3, 1, 2, 2, 1, 2, 1, 4},  // depthwise, dilation 2, padding 2
    {1, 2, 4, 4, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1},  // 1x1
};

ConvCase small(const ConvCase& k) {
  ConvCase s = k;
  s.n = 1;
  return s;
}

TEST(Conv2d, MatchesTheReferenceAcrossParameters) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  for (const ConvCase& k : kConvCases) {
    SCOPED_TRACE(describe(k));
    const Tensor x = uniform(rng, {k.n, k.c, k.h, k.w});
    const Tensor w = uniform(rng, {k.o, k.c / k.groups, k.kh, k.kw}), b = uniform(rng, {k.o});
    const Tensor expected = ref_conv2d(x, w, b, k);
    const Tensor out = conv2d(x, w, b, {k.sh, k.sw}, {k.ph, k.pw}, {k.dh, k.dw}, k.groups);
    EXPECT_ALL_CLOSE(out, expected, 1e-12, 1e-12);
    EXPECT_TRUE(out.is_contiguous());
    // Channels-last in, channels-last out; a sliced (non-dense) input; no bias.
    const Tensor cl = x.contiguous(MemoryFormat::ChannelsLast);
    const Tensor out_cl = conv2d(cl, w, b, {k.sh, k.sw}, {k.ph, k.pw}, {k.dh, k.dw}, k.groups);
    EXPECT_TRUE(out_cl.is_contiguous(MemoryFormat::ChannelsLast));
    EXPECT_ALL_CLOSE(out_cl, expected, 1e-12, 1e-12);
    const Tensor wide = zeros({k.n, k.c, k.h, 2 * k.w}, kFloat64);
    wide.slice(3, 0, 2 * k.w, 2).copy_(x);
    EXPECT_ALL_CLOSE(conv2d(wide.slice(3, 0, 2 * k.w, 2), w, std::nullopt, {k.sh, k.sw},
                            {k.ph, k.pw}, {k.dh, k.dw}, k.groups),
                     ref_conv2d(x, w, Tensor(), k), 1e-12, 1e-12);
  }
}

TEST(Conv2d, UnbatchedInputsAndEveryFloatingDtype) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const ConvCase k = kConvCases[1];
  const Tensor x = uniform(rng, {1, k.c, k.h, k.w});
  const Tensor w = uniform(rng, {k.o, k.c / k.groups, k.kh, k.kw}), b = uniform(rng, {k.o});
  const Tensor expected = ref_conv2d(x, w, b, k);
  const Tensor unbatched =
      conv2d(x.squeeze(0), w, b, {k.sh, k.sw}, {k.ph, k.pw}, {k.dh, k.dw}, k.groups);
  EXPECT_ALL_CLOSE(unbatched, expected.squeeze(0), 1e-12, 1e-12);
  for (ScalarType dtype : {kFloat32, kBFloat16, kFloat16}) {
    SCOPED_TRACE(scalar_type_name(dtype));
    const Tensor xd = x.to(dtype), wd = w.to(dtype), bd = b.to(dtype);
    const Tensor out = conv2d(xd, wd, bd, {k.sh, k.sw}, {k.ph, k.pw}, {k.dh, k.dw}, k.groups);
    EXPECT_EQ(out.dtype(), dtype);
    const double tol = dtype == kFloat32 ? 1e-5 : 3e-2;
    EXPECT_ALL_CLOSE(out, ref_conv2d(xd.to(kFloat64), wd.to(kFloat64), bd.to(kFloat64), k), tol,
                     tol);
  }
}

TEST(Conv2d, GradcheckWithStridePaddingDilationGroupsAndLayouts) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  for (const ConvCase& k0 : kConvCases) {
    const ConvCase k = small(k0);
    SCOPED_TRACE(describe(k));
    const Tensor x = leaf(uniform(rng, {k.n, k.c, k.h, k.w}));
    const Tensor w = leaf(uniform(rng, {k.o, k.c / k.groups, k.kh, k.kw}));
    const Tensor b = leaf(uniform(rng, {k.o}));
    for (bool channels_last : {false, true}) {
      EXPECT_TRUE(grad_ok(
          [&](const variable_list& in) -> variable_list {
            const Tensor xi = channels_last ? in[0].contiguous(MemoryFormat::ChannelsLast) : in[0];
            return {conv2d(xi, in[1], in[2], {k.sh, k.sw}, {k.ph, k.pw}, {k.dh, k.dw}, k.groups)};
          },
          {x, w, b}))
          << (channels_last ? "channels-last" : "contiguous");
    }
  }
  // A non-contiguous (transposed H/W) input and weight.
  const Tensor x = leaf(uniform(rng, {1, 2, 5, 4})), w = leaf(uniform(rng, {3, 2, 2, 3}));
  EXPECT_TRUE(grad_ok(
      [](const variable_list& in) -> variable_list {
        return {conv2d(in[0].transpose(2, 3), in[1].transpose(2, 3), std::nullopt, 1, 1)};
      },
      {x, w}));
  EXPECT_EQ(conv2d(x, w).grad_fn()->name(), "ConvolutionBackward0");
}

TEST(Conv2d, DoubleBackwardThroughConvolutionBackward) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const ConvCase k = small(kConvCases[1]);
  const Tensor x = leaf(uniform(rng, {k.n, k.c, k.h, k.w}));
  const Tensor w = leaf(uniform(rng, {k.o, k.c / k.groups, k.kh, k.kw}));
  const Tensor out = conv2d(x, w, std::nullopt, {k.sh, k.sw}, {k.ph, k.pw}, {k.dh, k.dw}, k.groups);
  const Tensor go = leaf(uniform(rng, out.sizes()));
  EXPECT_TRUE(grad_ok(
      [&](const variable_list& in) -> variable_list {
        auto [gi, gw, gb] = convolution_backward(in[0], in[1], in[2], {k.sh, k.sw}, {k.ph, k.pw},
                                                 {k.dh, k.dw}, k.groups, {true, true, true});
        return {gi, gw, gb};
      },
      {go, x, w}));
}

TEST(Conv2d, ErrorsFollowPyTorch) {
  const Tensor x = zeros({2, 4, 5, 5}), w = zeros({8, 3, 3, 3});
  EXPECT_THAT(error_of<ShapeError>([&] { conv2d(x, w); }),
              HasSubstr("Given groups=1, weight of size [8, 3, 3, 3], expected input[2, 4, 5, 5] "
                        "to have 3 channels, but got 4 channels instead"));
  EXPECT_THAT(error_of<ShapeError>([&] {
                conv2d(zeros({1, 3, 2, 2}), w);
              }),
              HasSubstr("Calculated padded input size per channel: (2 x 2). Kernel size: (3 x 3). "
                        "Kernel size can't be greater than actual input size"));
  EXPECT_THAT(error_of<ShapeError>([&] {
                conv2d(zeros({3, 4}), w);
              }),
              HasSubstr("Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of "
                        "size: [3, 4]"));
  EXPECT_THAT(error_of<ShapeError>([&] {
                conv2d(zeros({1, 3, 5, 5}), w, zeros({7}));
              }),
              HasSubstr("expected bias to be 1-dimensional with 8 elements"));
  EXPECT_THAT(error_of<ShapeError>([&] {
                conv2d(zeros({1, 3, 5, 5}), w, std::nullopt, 0);
              }),
              HasSubstr("non-positive stride is not supported"));
  EXPECT_THAT(error_of<ShapeError>([&] {
                conv2d(zeros({1, 3, 5, 5}), w, std::nullopt, {1, 2, 3});
              }),
              HasSubstr("expected stride to be a single integer value or a list of 2 values"));
  EXPECT_THAT(error_of<ShapeError>([&] {
                conv2d(zeros({1, 4, 5, 5}), zeros({6, 2, 3, 3}), std::nullopt, 1, 0, 1, 4);
              }),
              HasSubstr("Given groups=4, expected weight to be divisible by 4 at dimension 0"));
  EXPECT_THAT(error_of<DTypeError>([&] {
                conv2d(zeros({1, 3, 5, 5}), w.to(kFloat64));
              }),
              HasSubstr("expected input and weight to have the same dtype"));
  EXPECT_THAT(error_of<DTypeError>([&] {
                conv2d(zeros({1, 3, 5, 5}, kInt64), w.to(kInt64));
              }),
              HasSubstr("expected input of a floating dtype"));
  EXPECT_THAT(error_of<DeviceError>([&] {
                conv2d(zeros({1, 3, 5, 5}, Device("sim:0")), w);
              }),
              HasSubstr("devices, sim:0 and cpu!"));
}

// ---- pooling --------------------------------------------------------------------------------

struct PoolCase {
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  bool ceil_mode;
};

int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t out = num / s + 1;  // num >= 0 in every case here
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

// Max pooling of x [N, C, H, W] with PyTorch's argmax numbering: (values, indices).
std::pair<Tensor, Tensor> ref_max_pool(const Tensor& x, const PoolCase& k) {
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const int64_t oh = pool_out(h, k.kh, k.sh, k.ph, k.dh, k.ceil_mode);
  const int64_t ow = pool_out(w, k.kw, k.sw, k.pw, k.dw, k.ceil_mode);
  const std::vector<double> v = values_of(x);
  std::vector<double> out, idx;
  for (int64_t p = 0; p < n * c; ++p) {
    for (int64_t y = 0; y < oh; ++y) {
      for (int64_t z = 0; z < ow; ++z) {
        double best = -std::numeric_limits<double>::infinity();
        int64_t at = -1;
        for (int64_t i = 0; i < k.kh; ++i) {
          for (int64_t j = 0; j < k.kw; ++j) {
            const int64_t ih = y * k.sh - k.ph + i * k.dh, iw = z * k.sw - k.pw + j * k.dw;
            if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
            const double val = v[(p * h + ih) * w + iw];
            if (val > best) {
              best = val;
              at = ih * w + iw;
            }
          }
        }
        out.push_back(best);
        idx.push_back(static_cast<double>(at));
      }
    }
  }
  return {tensor_of(out, {n, c, oh, ow}), tensor_of(idx, {n, c, oh, ow})};
}

Tensor ref_avg_pool(const Tensor& x, const PoolCase& k, bool count_include_pad,
                    std::optional<int64_t> divisor) {
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const int64_t oh = pool_out(h, k.kh, k.sh, k.ph, 1, k.ceil_mode);
  const int64_t ow = pool_out(w, k.kw, k.sw, k.pw, 1, k.ceil_mode);
  const std::vector<double> v = values_of(x);
  std::vector<double> out;
  for (int64_t p = 0; p < n * c; ++p) {
    for (int64_t y = 0; y < oh; ++y) {
      for (int64_t z = 0; z < ow; ++z) {
        int64_t h0 = y * k.sh - k.ph, w0 = z * k.sw - k.pw;
        int64_t h1 = std::min(h0 + k.kh, h + k.ph), w1 = std::min(w0 + k.kw, w + k.pw);
        const int64_t pool_size = (h1 - h0) * (w1 - w0);
        h0 = std::max<int64_t>(h0, 0);
        w0 = std::max<int64_t>(w0, 0);
        h1 = std::min(h1, h);
        w1 = std::min(w1, w);
        double sum = 0;
        for (int64_t i = h0; i < h1; ++i) {
          for (int64_t j = w0; j < w1; ++j) sum += v[(p * h + i) * w + j];
        }
        const int64_t div =
            divisor ? *divisor : (count_include_pad ? pool_size : (h1 - h0) * (w1 - w0));
        out.push_back(sum / static_cast<double>(div));
      }
    }
  }
  return tensor_of(out, {n, c, oh, ow});
}

Tensor ref_adaptive(const Tensor& x, int64_t oh, int64_t ow) {
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const std::vector<double> v = values_of(x);
  std::vector<double> out;
  for (int64_t p = 0; p < n * c; ++p) {
    for (int64_t y = 0; y < oh; ++y) {
      for (int64_t z = 0; z < ow; ++z) {
        const int64_t h0 = y * h / oh, h1 = ((y + 1) * h + oh - 1) / oh;
        const int64_t w0 = z * w / ow, w1 = ((z + 1) * w + ow - 1) / ow;
        double sum = 0;
        for (int64_t i = h0; i < h1; ++i) {
          for (int64_t j = w0; j < w1; ++j) sum += v[(p * h + i) * w + j];
        }
        out.push_back(sum / static_cast<double>((h1 - h0) * (w1 - w0)));
      }
    }
  }
  return tensor_of(out, {n, c, oh, ow});
}

const std::vector<PoolCase> kPoolCases = {
    {2, 2, 2, 2, 0, 0, 1, 1, false},  // the classic 2x2/2
    {3, 3, 2, 2, 1, 1, 1, 1, true},   // ResNet's stem pool, ceil_mode
    {3, 2, 2, 1, 1, 0, 2, 1, false},  // dilation (max only)
    {2, 3, 3, 2, 1, 1, 1, 1, true},   // a window that starts in the padding, ceil_mode
};

TEST(Pool2d, MaxPoolValuesIndicesAndLayouts) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  for (const PoolCase& k : kPoolCases) {
    SCOPED_TRACE(::testing::PrintToString(
        std::vector<int64_t>{k.kh, k.kw, k.sh, k.sw, k.ph, k.pw, k.dh, k.dw, k.ceil_mode}));
    const Tensor x = uniform(rng, {2, 3, 7, 6});
    auto [ref, ref_idx] = ref_max_pool(x, k);
    auto [out, idx] = max_pool2d_with_indices(x, {k.kh, k.kw}, {k.sh, k.sw}, {k.ph, k.pw},
                                              {k.dh, k.dw}, k.ceil_mode);
    EXPECT_ALL_CLOSE(out, ref, 0, 0);
    EXPECT_EQ(idx.dtype(), kInt64);
    EXPECT_ALL_CLOSE(idx, ref_idx, 0, 0);
    EXPECT_ALL_CLOSE(
        max_pool2d(x, {k.kh, k.kw}, {k.sh, k.sw}, {k.ph, k.pw}, {k.dh, k.dw}, k.ceil_mode), ref, 0,
        0);
    const Tensor cl = max_pool2d(x.contiguous(MemoryFormat::ChannelsLast), {k.kh, k.kw},
                                 {k.sh, k.sw}, {k.ph, k.pw}, {k.dh, k.dw}, k.ceil_mode);
    EXPECT_TRUE(cl.is_contiguous(MemoryFormat::ChannelsLast));
    EXPECT_ALL_CLOSE(cl, ref, 0, 0);
    // Unbatched, and the reduced-precision dtypes (max is exact in any dtype).
    EXPECT_ALL_CLOSE(
        max_pool2d(x[0], {k.kh, k.kw}, {k.sh, k.sw}, {k.ph, k.pw}, {k.dh, k.dw}, k.ceil_mode),
        ref[0], 0, 0);
    for (ScalarType dtype : {kFloat32, kBFloat16, kFloat16}) {
      const Tensor xd = x.to(dtype);
      EXPECT_ALL_CLOSE(
          max_pool2d(xd, {k.kh, k.kw}, {k.sh, k.sw}, {k.ph, k.pw}, {k.dh, k.dw}, k.ceil_mode),
          ref_max_pool(xd.to(kFloat64), k).first, 0, 0)
          << scalar_type_name(dtype);
    }
  }
  // An empty stride means the kernel size.
  const Tensor x = uniform(rng, {1, 1, 4, 4});
  EXPECT_ALL_CLOSE(max_pool2d(x, 2), ref_max_pool(x, kPoolCases[0]).first, 0, 0);
}

TEST(Pool2d, AvgPoolCeilModePaddingAndDivisors) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  for (const PoolCase& k : kPoolCases) {
    if (k.dh != 1 || k.dw != 1) continue;
    const Tensor x = uniform(rng, {2, 3, 7, 6});
    for (bool include : {true, false}) {
      for (std::optional<int64_t> divisor : {std::optional<int64_t>(), std::optional<int64_t>(5)}) {
        SCOPED_TRACE(::testing::PrintToString(std::vector<int64_t>{
            k.kh, k.kw, k.sh, k.sw, k.ph, k.pw, k.ceil_mode, include, divisor.value_or(0)}));
        const Tensor ref = ref_avg_pool(x, k, include, divisor);
        EXPECT_ALL_CLOSE(
            avg_pool2d(x, {k.kh, k.kw}, {k.sh, k.sw}, {k.ph, k.pw}, k.ceil_mode, include, divisor),
            ref, 1e-12, 1e-12);
        const Tensor cl = avg_pool2d(x.contiguous(MemoryFormat::ChannelsLast), {k.kh, k.kw},
                                     {k.sh, k.sw}, {k.ph, k.pw}, k.ceil_mode, include, divisor);
        EXPECT_TRUE(cl.is_contiguous(MemoryFormat::ChannelsLast));
        EXPECT_ALL_CLOSE(cl, ref, 1e-12, 1e-12);
        const Tensor f32 = avg_pool2d(x.to(kFloat32), {k.kh, k.kw}, {k.sh, k.sw}, {k.ph, k.pw},
                                      k.ceil_mode, include, divisor);
        EXPECT_ALL_CLOSE(f32, ref, 1e-5, 1e-6);
        const Tensor bf = avg_pool2d(x.to(kBFloat16), {k.kh, k.kw}, {k.sh, k.sw}, {k.ph, k.pw},
                                     k.ceil_mode, include, divisor);
        EXPECT_ALL_CLOSE(bf, ref, 2e-2, 2e-2);
      }
    }
  }
}

TEST(Pool2d, AdaptiveAvgPoolEvenAndUnevenWindows) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const Tensor x = uniform(rng, {2, 3, 7, 6});
  for (auto [oh, ow] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {7, 3}, {3, 4}, {5, 5}}) {
    SCOPED_TRACE(std::to_string(oh) + "x" + std::to_string(ow));
    const Tensor ref = ref_adaptive(x, oh, ow);
    EXPECT_ALL_CLOSE(adaptive_avg_pool2d(x, {oh, ow}), ref, 1e-12, 1e-12);
    const Tensor cl = adaptive_avg_pool2d(x.contiguous(MemoryFormat::ChannelsLast), {oh, ow});
    EXPECT_TRUE(cl.is_contiguous(MemoryFormat::ChannelsLast));
    EXPECT_ALL_CLOSE(cl, ref, 1e-12, 1e-12);
    EXPECT_ALL_CLOSE(adaptive_avg_pool2d(x.to(kFloat16), {oh, ow}), ref, 5e-3, 5e-3);
  }
}

TEST(Pool2d, GradcheckIncludingCeilModeLayoutsAndDoubleBackward) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  for (const PoolCase& k : kPoolCases) {
    SCOPED_TRACE(::testing::PrintToString(
        std::vector<int64_t>{k.kh, k.kw, k.sh, k.sw, k.ph, k.pw, k.dh, k.dw, k.ceil_mode}));
    const Tensor x = leaf(uniform(rng, {1, 2, 5, 6}));
    for (bool channels_last : {false, true}) {
      auto layout = [channels_last](const Tensor& t) {
        return channels_last ? t.contiguous(MemoryFormat::ChannelsLast) : t;
      };
      EXPECT_TRUE(grad_ok(
          [&](const variable_list& in) -> variable_list {
            return {max_pool2d(layout(in[0]), {k.kh, k.kw}, {k.sh, k.sw}, {k.ph, k.pw},
                               {k.dh, k.dw}, k.ceil_mode)};
          },
          {x}))
          << "max";
      if (k.dh == 1 && k.dw == 1) {
        EXPECT_TRUE(grad_ok(
            [&](const variable_list& in) -> variable_list {
              return {avg_pool2d(layout(in[0]), {k.kh, k.kw}, {k.sh, k.sw}, {k.ph, k.pw},
                                 k.ceil_mode, !channels_last,
                                 channels_last ? std::optional<int64_t>(3) : std::nullopt)};
            },
            {x}))
            << "avg";
      }
    }
  }
  const Tensor x = leaf(uniform(rng, {2, 7, 5}));
  EXPECT_TRUE(grad_ok(
      [](const variable_list& in) -> variable_list {
        return {adaptive_avg_pool2d(in[0].transpose(1, 2), {3, 2})};
      },
      {x}));
  // The backwards' own gradients (with respect to the incoming gradient).
  const Tensor y = uniform(rng, {1, 2, 6, 5});
  auto [out, idx] = max_pool2d_with_indices(y, 3, 2, 1, 1, true);
  EXPECT_TRUE(grad_ok(
      [&](const variable_list& in) -> variable_list {
        return {max_pool2d_with_indices_backward(in[0], y, 3, 2, 1, 1, true, idx),
                avg_pool2d_backward(in[0], y, 3, 2, 1, true, false, std::nullopt),
                adaptive_avg_pool2d_backward(in[1], y)};
      },
      {leaf(uniform(rng, out.sizes())), leaf(uniform(rng, {1, 2, 4, 3}))}));
}

TEST(Pool2d, ErrorsFollowPyTorch) {
  const Tensor x = zeros({1, 3, 2, 2});
  EXPECT_THAT(error_of<ShapeError>([&] { max_pool2d(x, 3, 1, 2); }),
              HasSubstr("pad should be smaller than or equal to half of kernel size, but got "
                        "padW = 2, padH = 2, kW = 3, kH = 3"));
  EXPECT_THAT(error_of<ShapeError>([&] { max_pool2d(x, 3); }),
              HasSubstr("Given input size: (3x2x2). Calculated output size: (3x0x0). Output size "
                        "is too small"));
  EXPECT_THAT(error_of<ShapeError>([&] {
                avg_pool2d(zeros({2, 2}), 1);
              }),
              HasSubstr("Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for "
                        "input, but got: [2, 2]"));
  EXPECT_THAT(error_of<ShapeError>([&] { max_pool2d(x, 0); }),
              HasSubstr("kernel size should be greater than zero, but got kH: 0 kW: 0"));
  EXPECT_THAT(error_of<ShapeError>([&] { avg_pool2d(x, 1, 1, 0, false, true, 0); }),
              HasSubstr("divisor must be not zero"));
  EXPECT_THAT(error_of<ShapeError>([&] {
                adaptive_avg_pool2d(x, {1, -1});
              }),
              HasSubstr("elements of output_size must be greater than or equal to 0"));
  EXPECT_THAT(error_of<DTypeError>([&] {
                max_pool2d(zeros({1, 3, 2, 2}, kInt64), 1);
              }),
              HasSubstr("expected input of a floating dtype"));
  EXPECT_THAT(error_of<ShapeError>([&] {
                max_pool2d_with_indices_backward(zeros({1, 3, 3, 3}), zeros({1, 3, 4, 4}), 2, 2, 0,
                                                 1, false, zeros({1, 3, 2, 2}, kInt64));
              }),
              HasSubstr("expected grad_output of the pooling's output shape [1, 3, 2, 2] for input "
                        "[1, 3, 4, 4]"));
}

}  // namespace
}  // namespace ferry::testing
