// softmax and log_softmax, forward and backward, against the float64 loops along every dim of
// random shapes (contiguous, transposed, sliced; every dtype); the float64 loops by finite
// differences and by their defining properties; concurrency from several threads; errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "ferry/backends/cpu/dnnl/nn_kernels.h"
#include "ferry/iter/parallel.h"
#include "tests/cpu/nn/nn_test_util.h"

namespace ferry::cpu {
namespace {

using ::testing::HasSubstr;
using testing::nn::Layout;

TEST(NnSoftmax, MatchesFloat64LoopsAlongEveryDim) {
  SCOPED_TRACE(testing::seed_trace());
  auto rng = testing::test_rng();
  Generator gen(testing::test_seed());
  const Layout layouts[] = {Layout::kContiguous, Layout::kTransposed, Layout::kSliced};
  for (int iter = 0; iter < 24; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 3);
    std::vector<int64_t> sizes;
    for (int d = 0; d < rank; ++d) sizes.push_back(1 + static_cast<int64_t>(rng() % 20));
    const int64_t dim = static_cast<int64_t>(rng() % rank) - (rng() % 2 ? rank : 0);
    const bool log = iter % 2;
    const ScalarType dtype = testing::nn::kReducedAndF32[(iter / 2) % 3];
    const Layout lx = layouts[rng() % 3], ly = layouts[rng() % 3];
    SCOPED_TRACE(std::string(log ? "log_softmax" : "softmax") + " rank " + std::to_string(rank) +
                 " dim " + std::to_string(dim) + " " + testing::nn::layout_name(lx) + " -> " +
                 testing::nn::layout_name(ly));
    const Tensor x = testing::nn::random_in(sizes, dtype, lx, gen, 4.0);
    Tensor y = testing::nn::nan_in(sizes, dtype, ly), y64 = empty(sizes, kFloat64);
    softmax_forward(y, x, dim, log);
    softmax_forward(y64, testing::nn::f64(x), dim, log);
    FERRY_EXPECT_CLOSE(y, y64, dtype, "forward");
    const Tensor g = testing::nn::random_in(sizes, dtype, layouts[rng() % 3], gen);
    Tensor dx = testing::nn::nan_in(sizes, dtype, lx), dx64 = empty(sizes, kFloat64);
    softmax_backward(dx, g, y, dim, log);
    softmax_backward(dx64, testing::nn::f64(g), testing::nn::f64(y), dim, log);
    FERRY_EXPECT_CLOSE(dx, dx64, dtype, "backward");
  }
}

TEST(NnSoftmax, Float64LoopsSumToOneAndMatchFiniteDifferences) {
  SCOPED_TRACE(testing::seed_trace());
  Generator gen(testing::test_seed());
  const Tensor x = randn({3, 4, 5}, kFloat64, &gen), g = randn({3, 4, 5}, kFloat64, &gen);
  const Tensor v = randn({3, 4, 5}, kFloat64, &gen);
  for (int64_t dim : {0, 1, 2}) {
    for (bool log : {false, true}) {
      auto f = [&](const Tensor& t) {
        Tensor y = empty({3, 4, 5}, kFloat64);
        softmax_forward(y, t, dim, log);
        return y;
      };
      const Tensor y = f(x);
      Tensor dx = empty({3, 4, 5}, kFloat64);
      softmax_backward(dx, g, y, dim, log);
      EXPECT_TRUE(testing::nn::near_rel(testing::nn::fd_directional(f, x, v, g),
                                        testing::nn::dot(dx, v), 1e-6))
          << "dim " << dim << (log ? " log" : "");
      if (!log) {
        // every lane sums to one: the total is the number of lanes
        double total = 0;
        for (double val : testing::nn::values(y)) total += val;
        EXPECT_NEAR(total, 60.0 / static_cast<double>(y.size(dim)), 1e-12);
      }
    }
  }
  // A 0-d tensor is a softmax over one element.
  Tensor s = full({}, 3.0, kFloat32), out = empty({}, kFloat32);
  softmax_forward(out, s, 0, false);
  EXPECT_EQ(testing::nn::values(out)[0], 1.0);
  softmax_forward(out, s, -1, true);
  EXPECT_NEAR(testing::nn::values(out)[0], 0.0, 1e-5);  // oneDNN's log is approximate
}

TEST(NnKernels, ConcurrentCallersGetTheSameResultsAsOne) {
  SCOPED_TRACE(testing::seed_trace());
  Generator gen(testing::test_seed());
  const Tensor a = randn({2, 33, 40}, kFloat32, &gen), b = randn({2, 40, 17}, kFloat32, &gen);
  const Tensor x = randn({2, 8, 9, 9}, kFloat32, &gen), w = randn({6, 8, 3, 3}, kFloat32, &gen);
  Tensor want_gemm = empty({2, 33, 17}), want_conv = empty({2, 6, 7, 7}),
         want_sm = empty({2, 33, 40});
  gemm(want_gemm, a, b);
  conv2d_forward(want_conv, x, w, Tensor(), Conv2dParams{});
  softmax_forward(want_sm, a, -1, false);
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        Tensor g = empty({2, 33, 17}), c = empty({2, 6, 7, 7}), s = empty({2, 33, 40});
        gemm(g, a, b);
        conv2d_forward(c, x, w, Tensor(), Conv2dParams{});
        softmax_forward(s, a, -1, false);
        // Team sizes may differ between calls, and with them the summation order.
        if (testing::nn::scaled_error(g, want_gemm) > 1e-5 ||
            testing::nn::scaled_error(c, want_conv) > 1e-5 ||
            testing::nn::scaled_error(s, want_sm) > 1e-6) {
          ++failures[static_cast<size_t>(t)];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int f : failures) EXPECT_EQ(f, 0);
}

TEST(NnKernels, CallsInsideAParallelRegionWork) {
  Tensor a = ones({1, 16, 16}), b = ones({1, 16, 16});
  std::vector<Tensor> outs(4);
  for (auto& o : outs) o = empty({1, 16, 16});
  parallel_for(0, 4, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) gemm(outs[static_cast<size_t>(i)], a, b);
  });
  for (const auto& o : outs) {
    for (double v : testing::nn::values(o)) EXPECT_EQ(v, 16.0);
  }
}

TEST(NnSoftmax, BadArgumentsRaise) {
  Tensor x = ones({2, 3});
  EXPECT_THAT(testing::error_of<IndexError>([&] {
                softmax_forward(empty({2, 3}), x, 2, false);
              }),
              HasSubstr("2"));
  std::string msg = testing::error_of<ShapeError>([&] {
    softmax_forward(empty({3, 2}), x, 1, true);
  });
  EXPECT_THAT(msg, HasSubstr("[2, 3]"));
  EXPECT_THAT(msg, HasSubstr("[3, 2]"));
  EXPECT_THAT(testing::error_of<ShapeError>([&] {
                softmax_backward(empty({2, 3}), ones({2, 4}), x, 1, false);
              }),
              HasSubstr("[2, 4]"));
  EXPECT_THAT(testing::error_of<DTypeError>([&] {
                softmax_forward(empty({2, 3}, kInt32), ones({2, 3}, kInt32), 1, false);
              }),
              HasSubstr("Int32"));
  EXPECT_THAT(testing::error_of<DeviceError>([&] {
                softmax_forward(empty({2, 3}), empty({2, 3}, Device("sim:0")), 1, false);
              }),
              HasSubstr("sim"));
}

}  // namespace
}  // namespace ferry::cpu
