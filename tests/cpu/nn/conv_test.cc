// conv2d forward, backward-input and backward-weight against the float64 loops on random
// configurations (groups, depthwise, stride, padding, dilation; contiguous, channels-last and
// sliced operands; every dtype); the float64 path (im2col and the packed GEMM) against the loops;
// the float64 loops against a GEMM (1x1 kernels) and the adjoint identity with finite
// differences; and the error messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/backends/cpu/dnnl/nn_kernels.h"
#include "ferry/backends/cpu/dnnl/nn_reference.h"
#include "ferry/iter/parallel.h"
#include "tests/cpu/nn/nn_test_util.h"

namespace ferry::cpu {
namespace {

using ::testing::HasSubstr;
using testing::nn::Layout;

struct ConvCase {
  int64_t n, c, h, w, o, kh, kw;
  Conv2dParams p;
  int64_t oh() const {
    return (h + 2 * p.padding[0] - p.dilation[0] * (kh - 1) - 1) / p.stride[0] + 1;
  }
  int64_t ow() const {
    return (w + 2 * p.padding[1] - p.dilation[1] * (kw - 1) - 1) / p.stride[1] + 1;
  }
  std::string str() const {
    return "N" + std::to_string(n) + " C" + std::to_string(c) + " " + std::to_string(h) + "x" +
           std::to_string(w) + " O" + std::to_string(o) + " k" + std::to_string(kh) + "x" +
           std::to_string(kw) + " s" + std::to_string(p.stride[0]) + " p" +
           std::to_string(p.padding[0]) + " d" + std::to_string(p.dilation[0]) + " g" +
           std::to_string(p.groups);
  }
};

ConvCase random_case(std::mt19937_64& rng) {
  ConvCase c{};
  auto pick = [&](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng() % (hi - lo + 1));
  };
  const int kind = static_cast<int>(rng() % 3);  // plain, grouped, depthwise
  c.p.groups = kind == 0 ? 1 : kind == 1 ? 2 : pick(2, 6);
  c.c = kind == 2 ? c.p.groups : c.p.groups * pick(1, 4);
  c.o = kind == 2 ? c.p.groups : c.p.groups * pick(1, 4);
  c.n = pick(1, 2);
  c.kh = pick(1, 3);
  c.kw = pick(1, 3);
  c.p.stride = {pick(1, 2), pick(1, 2)};
  c.p.padding = {pick(0, 1), pick(0, 1)};
  c.p.dilation = {pick(1, 2), pick(1, 2)};
  c.h = pick(c.p.dilation[0] * (c.kh - 1) + 1, 9);
  c.w = pick(c.p.dilation[1] * (c.kw - 1) + 1, 9);
  return c;
}

TEST(NnConv, AllThreeKernelsMatchFloat64LoopsOnRandomConfigurations) {
  SCOPED_TRACE(testing::seed_trace());
  auto rng = testing::test_rng();
  Generator gen(testing::test_seed());
  const Layout act_layouts[] = {Layout::kContiguous, Layout::kChannelsLast, Layout::kSliced};
  for (int iter = 0; iter < 18; ++iter) {
    const ConvCase c = random_case(rng);
    const ScalarType dtype = testing::nn::kReducedAndF32[iter % 3];
    const Layout lx = act_layouts[rng() % 3], ly = act_layouts[rng() % 2];
    const Layout lw = rng() % 2 ? Layout::kChannelsLast : Layout::kContiguous;
    SCOPED_TRACE(c.str() + " input " + testing::nn::layout_name(lx) + " out " +
                 testing::nn::layout_name(ly) + " weight " + testing::nn::layout_name(lw));
    const Tensor x = testing::nn::random_in({c.n, c.c, c.h, c.w}, dtype, lx, gen);
    const Tensor w = testing::nn::random_in({c.o, c.c / c.p.groups, c.kh, c.kw}, dtype, lw, gen);
    const Tensor b =
        iter % 2 ? testing::nn::random_in({c.o}, dtype, Layout::kContiguous, gen) : Tensor();
    const Tensor dy = testing::nn::random_in({c.n, c.o, c.oh(), c.ow()}, dtype, ly, gen);
    // forward
    Tensor y = testing::nn::nan_in({c.n, c.o, c.oh(), c.ow()}, dtype, ly);
    Tensor y64 = empty({c.n, c.o, c.oh(), c.ow()}, kFloat64);
    conv2d_forward(y, x, w, b, c.p);
    conv2d_forward(y64, testing::nn::f64(x), testing::nn::f64(w), testing::nn::f64(b), c.p);
    FERRY_EXPECT_CLOSE(y, y64, dtype, "forward");
    // backward input
    Tensor dx = testing::nn::nan_in({c.n, c.c, c.h, c.w}, dtype,
                                    lx == Layout::kSliced ? Layout::kContiguous : lx);
    Tensor dx64 = empty({c.n, c.c, c.h, c.w}, kFloat64);
    conv2d_backward_input(dx, dy, w, c.p);
    conv2d_backward_input(dx64, testing::nn::f64(dy), testing::nn::f64(w), c.p);
    FERRY_EXPECT_CLOSE(dx, dx64, dtype, "backward input");
    // backward weight (+ bias)
    Tensor dw = testing::nn::nan_in({c.o, c.c / c.p.groups, c.kh, c.kw}, dtype, lw);
    Tensor db = b.defined() ? testing::nn::nan_in({c.o}, dtype, Layout::kContiguous) : Tensor();
    Tensor dw64 = empty({c.o, c.c / c.p.groups, c.kh, c.kw}, kFloat64);
    Tensor db64 = empty({c.o}, kFloat64);
    conv2d_backward_weight(dw, db, x, dy, c.p);
    conv2d_backward_weight(dw64, db64, testing::nn::f64(x), testing::nn::f64(dy), c.p);
    // Weight gradients sum N * oH * oW products: a bfloat16 result rounds a larger sum.
    FERRY_EXPECT_CLOSE(dw, dw64, dtype, "backward weight");
    if (db.defined()) {
      FERRY_EXPECT_CLOSE(db, db64, dtype, "backward bias");
    }
  }
}

// float64 convolutions run as im2col and the packed float64 GEMM (conv_gemm_f64.cc); the direct
// loops (reference::conv2d_*) are their reference here, on random configurations and on every
// layout of each operand: outputs whose spatial dims do not read as one (sliced) go through a
// dense image, a non-contiguous grad_weight through a dense temporary; then with the col matrix
// cut into bands of one and two output rows.
TEST(NnConv, Float64GemmPathMatchesTheDirectLoops) {
  SCOPED_TRACE(testing::seed_trace());
  auto rng = testing::test_rng();
  Generator gen(testing::test_seed());
  const Layout layouts[] = {Layout::kContiguous, Layout::kChannelsLast, Layout::kSliced};
  std::vector<ConvCase> cases;
  for (int i = 0; i < 16; ++i) cases.push_back(random_case(rng));
  ConvCase wide{2, 24, 13, 11, 40, 3, 3, Conv2dParams{}};  // rows 216 x cols 143 per group
  wide.p.padding = {1, 1};
  cases.push_back(wide);
  ConvCase batch{7, 4, 6, 5, 6, 3, 3, Conv2dParams{}};  // weight gradients in four runs of images
  batch.p.groups = 2;
  cases.push_back(batch);
  for (const ConvCase& c : cases) {
    const Layout lx = layouts[rng() % 3], ly = layouts[rng() % 3], ldy = layouts[rng() % 3];
    const Layout lw = rng() % 2 ? Layout::kChannelsLast : Layout::kContiguous;
    SCOPED_TRACE(c.str() + " input " + testing::nn::layout_name(lx) + " out " +
                 testing::nn::layout_name(ly) + " grad_out " + testing::nn::layout_name(ldy) +
                 " weight " + testing::nn::layout_name(lw));
    const int64_t cg = c.c / c.p.groups;
    const Tensor x = testing::nn::random_in({c.n, c.c, c.h, c.w}, kFloat64, lx, gen);
    const Tensor w = testing::nn::random_in({c.o, cg, c.kh, c.kw}, kFloat64, lw, gen);
    const Tensor b = testing::nn::random_in({c.o}, kFloat64, Layout::kSliced, gen);
    const Tensor dy = testing::nn::random_in({c.n, c.o, c.oh(), c.ow()}, kFloat64, ldy, gen);
    Tensor y = testing::nn::nan_in({c.n, c.o, c.oh(), c.ow()}, kFloat64, ly);
    Tensor y_loops = empty({c.n, c.o, c.oh(), c.ow()}, kFloat64);
    conv2d_forward(y, x, w, b, c.p);
    reference::conv2d_forward(y_loops, x, w, b, c.p);
    FERRY_EXPECT_CLOSE(y, y_loops, kFloat64, "forward");
    Tensor dx = testing::nn::nan_in({c.n, c.c, c.h, c.w}, kFloat64, lx);
    Tensor dx_loops = empty({c.n, c.c, c.h, c.w}, kFloat64);
    conv2d_backward_input(dx, dy, w, c.p);
    reference::conv2d_backward_input(dx_loops, dy, w, c.p);
    FERRY_EXPECT_CLOSE(dx, dx_loops, kFloat64, "backward input");
    Tensor dw = testing::nn::nan_in({c.o, cg, c.kh, c.kw}, kFloat64, lw);
    Tensor db = testing::nn::nan_in({c.o}, kFloat64, Layout::kSliced);
    Tensor dw_loops = empty({c.o, cg, c.kh, c.kw}, kFloat64), db_loops = empty({c.o}, kFloat64);
    conv2d_backward_weight(dw, db, x, dy, c.p);
    reference::conv2d_backward_weight(dw_loops, db_loops, x, dy, c.p);
    FERRY_EXPECT_CLOSE(dw, dw_loops, kFloat64, "backward weight");
    FERRY_EXPECT_CLOSE(db, db_loops, kFloat64, "backward bias");
    // The same bits at one thread: images are summed in fixed runs, whatever the thread count.
    const int saved = get_num_threads();
    set_num_threads(1);
    Tensor y1 = empty_like(y), dx1 = empty_like(dx), dw1 = empty_like(dw), db1 = empty_like(db);
    conv2d_forward(y1, x, w, b, c.p);
    conv2d_backward_input(dx1, dy, w, c.p);
    conv2d_backward_weight(dw1, db1, x, dy, c.p);
    set_num_threads(saved);
    using testing::nn::values;
    EXPECT_EQ(values(y1), values(y)) << "forward at 1 and " << saved << " threads";
    EXPECT_EQ(values(dx1), values(dx)) << "backward input at 1 and " << saved << " threads";
    EXPECT_EQ(values(dw1), values(dw)) << "backward weight at 1 and " << saved << " threads";
    EXPECT_EQ(values(db1), values(db)) << "backward bias at 1 and " << saved << " threads";
    // The col matrix in bands of one and of two output rows (the last one short when oH is odd).
    const int64_t row_bytes = cg * c.kh * c.kw * c.ow() * 8;
    for (int64_t band : {1, 2}) {
      SCOPED_TRACE("bands of " + std::to_string(band) + " output rows");
      const int64_t saved_budget = reference::detail::set_conv_f64_col_budget(band * row_bytes);
      Tensor yb = empty_like(y), dxb = empty_like(dx), dwb = empty_like(dw), dbb = empty_like(db);
      conv2d_forward(yb, x, w, b, c.p);
      conv2d_backward_input(dxb, dy, w, c.p);
      conv2d_backward_weight(dwb, dbb, x, dy, c.p);
      reference::detail::set_conv_f64_col_budget(saved_budget);
      FERRY_EXPECT_CLOSE(yb, y_loops, kFloat64, "forward");
      FERRY_EXPECT_CLOSE(dxb, dx_loops, kFloat64, "backward input");
      FERRY_EXPECT_CLOSE(dwb, dw_loops, kFloat64, "backward weight");
    }
  }
}

// NCHW forward convolutions larger than 1 x 1 run on oneDNN's channels-last or blocked layouts,
// with the input, weights and output reordered around the primitive (Note [Blocked forward
// convolution] in conv.cc): ResNet's stem (3 input channels, 7 x 7, stride 2; two 16-channel blocks
// of output, copied back by the copy engine: Note [Activation reorders]), a 3 x 3 layer whose
// channels are no multiple of the 16-channel block, with a bias, a grouped one, and an output
// written into a sliced tensor; the cached entry is used twice.
TEST(NnConv, BlockedForwardOfNchwInputsMatchesFloat64Loops) {
  SCOPED_TRACE(testing::seed_trace());
  Generator gen(testing::test_seed());
  struct Case {
    ConvCase c;
    bool bias;
  };
  Conv2dParams stem;
  stem.stride = {2, 2};
  stem.padding = {3, 3};
  Conv2dParams same;
  same.padding = {1, 1};
  Conv2dParams grouped = same;
  grouped.groups = 2;
  const Case cases[] = {{{2, 3, 20, 18, 32, 7, 7, stem}, false},
                        {{2, 20, 9, 11, 24, 3, 3, same}, true},
                        {{1, 32, 8, 8, 32, 3, 3, grouped}, false}};
  for (const Case& k : cases) {
    const ConvCase& c = k.c;
    for (ScalarType dtype : {kFloat32, kBFloat16}) {
      for (Layout ly : {Layout::kContiguous, Layout::kSliced}) {
        SCOPED_TRACE(c.str() + " " + std::string(scalar_type_name(dtype)) + " out " +
                     testing::nn::layout_name(ly));
        const Tensor x =
            testing::nn::random_in({c.n, c.c, c.h, c.w}, dtype, Layout::kContiguous, gen);
        const Tensor w = testing::nn::random_in({c.o, c.c / c.p.groups, c.kh, c.kw}, dtype,
                                                Layout::kContiguous, gen);
        const Tensor b =
            k.bias ? testing::nn::random_in({c.o}, dtype, Layout::kContiguous, gen) : Tensor();
        Tensor y64 = empty({c.n, c.o, c.oh(), c.ow()}, kFloat64);
        conv2d_forward(y64, testing::nn::f64(x), testing::nn::f64(w), testing::nn::f64(b), c.p);
        for (int twice = 0; twice < 2; ++twice) {
          Tensor y = testing::nn::nan_in({c.n, c.o, c.oh(), c.ow()}, dtype, ly);
          conv2d_forward(y, x, w, b, c.p);
          FERRY_EXPECT_CLOSE(y, y64, dtype, "forward");
        }
      }
    }
  }
}

TEST(NnConv, Float64LoopsOfA1x1KernelAreAGemm) {
  SCOPED_TRACE(testing::seed_trace());
  Generator gen(testing::test_seed());
  const Tensor x = randn({2, 5, 3, 4}, kFloat64, &gen), w = randn({6, 5, 1, 1}, kFloat64, &gen);
  Tensor y = empty({2, 6, 3, 4}, kFloat64);
  conv2d_forward(y, x, w, Tensor(), Conv2dParams{});
  // y[n] = w[6, 5] @ x[n][5, 12]
  Tensor want = empty({2, 6, 12}, kFloat64);
  gemm(want, w.view({1, 6, 5}).expand({2, 6, 5}), x.view({2, 5, 12}));
  EXPECT_LE(testing::nn::scaled_error(y.view({2, 6, 12}), want), 1e-12);
}

TEST(NnConv, Float64LoopsMatchAHandComputedPaddedConvolution) {
  // 3x3 input 1..9, 2x2 kernel of ones, padding 1: sums of each 2x2 window of the padded input.
  Tensor x = arange(1, 10, 1, kFloat64).view({1, 1, 3, 3});
  Tensor w = ones({1, 1, 2, 2}, kFloat64);
  Conv2dParams p;
  p.padding = {1, 1};
  Tensor y = empty({1, 1, 4, 4}, kFloat64);
  conv2d_forward(y, x, w, full({1}, 0.5, kFloat64), p);
  EXPECT_EQ(testing::nn::values(y),
            (std::vector<double>{1.5, 3.5, 5.5, 3.5, 5.5, 12.5, 16.5, 9.5, 11.5, 24.5, 28.5, 15.5,
                                 7.5, 15.5, 17.5, 9.5}));
}

TEST(NnConv, BackwardKernelsAreAdjointsOfTheForwardInFloat64) {
  SCOPED_TRACE(testing::seed_trace());
  auto rng = testing::test_rng();
  Generator gen(testing::test_seed());
  for (int iter = 0; iter < 6; ++iter) {
    const ConvCase c = random_case(rng);
    SCOPED_TRACE(c.str());
    const Tensor x = randn({c.n, c.c, c.h, c.w}, kFloat64, &gen);
    const Tensor w = randn({c.o, c.c / c.p.groups, c.kh, c.kw}, kFloat64, &gen);
    const Tensor b = randn({c.o}, kFloat64, &gen);
    const Tensor g = randn({c.n, c.o, c.oh(), c.ow()}, kFloat64, &gen);
    const Tensor vx = randn(x.sizes(), kFloat64, &gen), vw = randn(w.sizes(), kFloat64, &gen);
    const Tensor vb = randn(b.sizes(), kFloat64, &gen);
    auto conv = [&](const Tensor& xi, const Tensor& wi, const Tensor& bi) {
      Tensor y = empty({c.n, c.o, c.oh(), c.ow()}, kFloat64);
      conv2d_forward(y, xi, wi, bi, c.p);
      return y;
    };
    Tensor dx = empty(x.sizes(), kFloat64), dw = empty(w.sizes(), kFloat64),
           db = empty({c.o}, kFloat64);
    conv2d_backward_input(dx, g, w, c.p);
    conv2d_backward_weight(dw, db, x, g, c.p);
    // <g, J_x vx> = <dx, vx>, and the same for the weight and the bias; J by finite differences.
    const double jx =
        testing::nn::fd_directional([&](const Tensor& t) { return conv(t, w, b); }, x, vx, g);
    const double jw =
        testing::nn::fd_directional([&](const Tensor& t) { return conv(x, t, b); }, w, vw, g);
    const double jb =
        testing::nn::fd_directional([&](const Tensor& t) { return conv(x, w, t); }, b, vb, g);
    EXPECT_TRUE(testing::nn::near_rel(jx, testing::nn::dot(dx, vx), 1e-7)) << jx;
    EXPECT_TRUE(testing::nn::near_rel(jw, testing::nn::dot(dw, vw), 1e-7)) << jw;
    EXPECT_TRUE(testing::nn::near_rel(jb, testing::nn::dot(db, vb), 1e-7)) << jb;
    // The forward is linear in x: the exact adjoint identity holds too.
    EXPECT_TRUE(testing::nn::near_rel(testing::nn::dot(g, conv(vx, w, Tensor())),
                                      testing::nn::dot(dx, vx), 1e-10));
  }
}

TEST(NnConv, DegenerateShapes) {
  // No input channels: the output is the bias.
  Tensor y = empty({2, 3, 4, 4});
  conv2d_forward(y, empty({2, 0, 4, 4}), empty({3, 0, 1, 1}), full({3}, 2.0), Conv2dParams{});
  for (double v : testing::nn::values(y)) EXPECT_EQ(v, 2.0);
  Tensor dw = full({3, 2, 1, 1}, 5.0), db = full({3}, 5.0);
  conv2d_backward_weight(dw, db, empty({0, 2, 4, 4}), empty({0, 3, 4, 4}), Conv2dParams{});
  for (double v : testing::nn::values(dw)) EXPECT_EQ(v, 0.0);
  for (double v : testing::nn::values(db)) EXPECT_EQ(v, 0.0);
}

TEST(NnConv, BadShapesRaiseNamingBoth) {
  Tensor x = ones({2, 4, 8, 8}), w = ones({6, 3, 3, 3}), y = empty({2, 6, 6, 6});
  std::string msg = testing::error_of<ShapeError>([&] { conv2d_forward(y, x, w, Tensor(), {}); });
  EXPECT_THAT(msg, HasSubstr("[2, 4, 8, 8]"));
  EXPECT_THAT(msg, HasSubstr("[6, 3, 3, 3]"));
  msg = testing::error_of<ShapeError>([&] {
    conv2d_forward(empty({2, 6, 5, 5}), x, ones({6, 4, 3, 3}), Tensor(), {});
  });
  EXPECT_THAT(msg, HasSubstr("[2, 6, 6, 6]"));
  EXPECT_THAT(msg, HasSubstr("[2, 6, 5, 5]"));
  Conv2dParams g3;
  g3.groups = 3;
  EXPECT_THAT(testing::error_of<ShapeError>([&] { conv2d_forward(y, x, w, Tensor(), g3); }),
              HasSubstr("divisible by groups"));
  Conv2dParams zero_stride;
  zero_stride.stride = {0, 1};
  EXPECT_THAT(testing::error_of<ShapeError>([&] {
                conv2d_forward(y, x, ones({6, 4, 3, 3}), Tensor(), zero_stride);
              }),
              HasSubstr("stride >= 1"));
  EXPECT_THAT(
      testing::error_of<ShapeError>([&] {
        conv2d_forward(empty({2, 6, 1, 1}), ones({2, 4, 2, 2}), ones({6, 4, 3, 3}), Tensor(), {});
      }),
      HasSubstr("smaller than the dilated kernel"));
  EXPECT_THAT(
      testing::error_of<ShapeError>([&] {
        conv2d_backward_input(empty({2, 4, 8, 8}), ones({2, 6, 5, 5}), ones({6, 4, 3, 3}), {});
      }),
      HasSubstr("[2, 6, 6, 6]"));
  EXPECT_THAT(testing::error_of<ShapeError>([&] {
                conv2d_backward_weight(empty({6, 4, 3, 3}), empty({5}), x, ones({2, 6, 6, 6}), {});
              }),
              HasSubstr("[6]"));
  EXPECT_THAT(testing::error_of<DTypeError>([&] {
                conv2d_forward(y, x, ones({6, 4, 3, 3}, kBFloat16), Tensor(), {});
              }),
              HasSubstr("BFloat16"));
}

}  // namespace
}  // namespace ferry::cpu
