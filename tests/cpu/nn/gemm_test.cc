// cpu::gemm against the float64 path on random shapes, layouts (transposed, sliced, broadcast
// batch), alpha/beta/bias and every dtype; the float64 path (the packed kernel of gemm_f64.h)
// against a long-double product on every SIMD target and against hand-computed products;
// integer GEMMs; the primitive cache; and the error messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "ferry/backends/cpu/dnnl/nn_kernels.h"
#include "ferry/backends/cpu/dnnl/primitive_cache.h"
#include "ferry/backends/cpu/gemm_f64.h"
#include "ferry/backends/cpu/simd.h"
#include "tests/cpu/nn/nn_test_util.h"

namespace ferry::cpu {
namespace {

using ::testing::HasSubstr;
using testing::nn::Layout;

// A [B, R, C] operand in one of the layouts gemm must take: contiguous, transposed matrices,
// sliced (every other column), or (when `may_broadcast`) one matrix broadcast over the batch.
Tensor gemm_operand(int64_t b, int64_t r, int64_t c, ScalarType dtype, int kind, Generator& gen,
                    bool may_broadcast) {
  switch (kind) {
    case 1:
      return testing::nn::random_in({b, c, r}, dtype, Layout::kContiguous, gen).transpose(1, 2);
    case 2:
      return testing::nn::random_in({b, r, c}, dtype, Layout::kSliced, gen);
    case 3:
      if (may_broadcast) {
        return testing::nn::random_in({1, r, c}, dtype, Layout::kContiguous, gen).expand({b, r, c});
      }
      [[fallthrough]];
    default:
      return testing::nn::random_in({b, r, c}, dtype, Layout::kContiguous, gen);
  }
}

TEST(NnGemm, MatchesFloat64LoopsOnRandomShapesLayoutsAndDtypes) {
  SCOPED_TRACE(testing::seed_trace());
  auto rng = testing::test_rng();
  Generator gen(testing::test_seed());
  for (int iter = 0; iter < 24; ++iter) {
    const int64_t b = 1 + static_cast<int64_t>(rng() % 3), m = 1 + static_cast<int64_t>(rng() % 37);
    const int64_t k = 1 + static_cast<int64_t>(rng() % 45),
                  n = 1 + static_cast<int64_t>(rng() % 33);
    const ScalarType dtype = testing::nn::kReducedAndF32[iter % 3];
    const double alpha = iter % 4 == 1 ? 0.5 : 1.0, beta = iter % 3 == 2 ? 0.75 : 0.0;
    const Tensor a = gemm_operand(b, m, k, dtype, static_cast<int>(rng() % 4), gen, true);
    const Tensor bm = gemm_operand(b, k, n, dtype, static_cast<int>(rng() % 4), gen, true);
    Tensor out = gemm_operand(b, m, n, dtype, static_cast<int>(rng() % 3), gen, false);
    const Tensor bias =
        iter % 2 == 0 ? testing::nn::random_in({n}, dtype, Layout::kContiguous, gen) : Tensor();
    Tensor want = testing::nn::f64(out);
    gemm(want, testing::nn::f64(a), testing::nn::f64(bm), alpha, beta, testing::nn::f64(bias));
    gemm(out, a, bm, alpha, beta, bias);
    SCOPED_TRACE("B=" + std::to_string(b) + " M=" + std::to_string(m) + " K=" + std::to_string(k) +
                 " N=" + std::to_string(n));
    FERRY_EXPECT_CLOSE(out, want, dtype, "gemm");
  }
}

// One large float32 product with a column-major b runs on oneDNN's dnnl_sgemm (Note [float32
// GEMM through dnnl_sgemm] in gemm.cc): row- and column-major a, an output whose rows are longer
// than n, alpha, beta with and without a bias (the latter on the primitive), and NaNs in an
// output that beta = 0 must ignore.
TEST(NnGemm, LargeFloat32ProductsWithATransposedBMatchFloat64Loops) {
  SCOPED_TRACE(testing::seed_trace());
  Generator gen(testing::test_seed());
  const int64_t m = 260, k = 300, n = 257;
  struct Case {
    bool a_transposed, out_strided, bias;
    double alpha, beta;
  };
  const Case cases[] = {{false, false, true, 1.0, 0.0},
                        {true, true, true, 0.5, 0.0},
                        {false, true, false, 1.0, 0.75},
                        {true, false, true, 1.0, 0.75}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string("a ") + (c.a_transposed ? "column" : "row") + "-major, alpha " +
                 std::to_string(c.alpha) + ", beta " + std::to_string(c.beta) +
                 (c.bias ? ", bias" : ""));
    const Tensor a = c.a_transposed ? randn({1, k, m}, kFloat32, &gen).transpose(1, 2)
                                    : randn({1, m, k}, kFloat32, &gen);
    const Tensor b = randn({1, n, k}, kFloat32, &gen).transpose(1, 2);  // W^T, as linear's
    const Tensor bias = c.bias ? randn({n}, kFloat32, &gen) : Tensor();
    Tensor out = c.out_strided ? randn({1, m, n + 7}, kFloat32, &gen).narrow(2, 0, n)
                               : randn({1, m, n}, kFloat32, &gen);
    Tensor want = testing::nn::f64(out);
    if (c.beta == 0) out.fill_(std::nan(""));
    gemm(want, testing::nn::f64(a), testing::nn::f64(b), c.alpha, c.beta, testing::nn::f64(bias));
    gemm(out, a, b, c.alpha, c.beta, bias);
    FERRY_EXPECT_CLOSE(out, want, kFloat32, "gemm");
  }
}

// out = alpha * a b + beta * out + bias, each element in long double, with the bound
// sum |alpha a_ik b_kj| + |beta out| + |bias| that scales a float64 product's rounding error.
struct LongDoubleProduct {
  std::vector<long double> value, magnitude;
};

LongDoubleProduct long_double_product(const Tensor& out, const Tensor& a, const Tensor& b,
                                      double alpha, double beta, const Tensor& bias) {
  const int64_t batches = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  const Tensor ac = a.contiguous(), bc = b.contiguous(), oc = out.contiguous();
  const double *pa = ac.data_ptr<double>(), *pb = bc.data_ptr<double>();
  const double* po = oc.data_ptr<double>();
  LongDoubleProduct r;
  for (int64_t bi = 0; bi < batches; ++bi) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        long double sum = 0, mag = 0;
        for (int64_t p = 0; p < k; ++p) {
          const long double t =
              static_cast<long double>(pa[(bi * m + i) * k + p]) * pb[(bi * k + p) * n + j];
          sum += t;
          mag += std::fabs(t);
        }
        long double v = alpha * sum;
        mag *= std::fabs(alpha);
        if (beta != 0) {
          const long double c = static_cast<long double>(beta) * po[(bi * m + i) * n + j];
          v += c;
          mag += std::fabs(c);
        }
        if (bias.defined()) {
          const long double c = bias[j].item<double>();
          v += c;
          mag += std::fabs(c);
        }
        r.value.push_back(v);
        r.magnitude.push_back(mag);
      }
    }
  }
  return r;
}

// Shapes across every boundary of the kernel: register tiles (6 x 2 or 8 x 3 vectors),
// slabs of a, the k slices (kDepth 128) and the caller's blocks (kGemmBlockCols columns, rows
// split by the thread count), then random ones; every layout of gemm_operand, alpha, beta (0
// with NaN in out) and a bias. Two threads give the same bits as one: the rows split
// differently, but each element sums over k in the same order.
TEST(NnGemm, Float64KernelMatchesALongDoubleProductOnEveryTarget) {
  SCOPED_TRACE(testing::seed_trace());
  auto rng = testing::test_rng();
  Generator gen(testing::test_seed());
  struct Shape {
    int64_t b, m, k, n;
  };
  std::vector<Shape> shapes = {{1, 1, 1, 1},      {1, 6, 256, 16},
                               {1, 8, 256, 24},   {1, 9, 257, 25},
                               {1, 7, 257, 17},   {2, 149, 520, kernels::kGemmBlockCols + 9},
                               {1, 301, 130, 40}, {1, 75, 3, 300}};
  for (int i = 0; i < 8; ++i) {
    shapes.push_back({1 + static_cast<int64_t>(rng() % 2), 1 + static_cast<int64_t>(rng() % 160),
                      1 + static_cast<int64_t>(rng() % 300),
                      1 + static_cast<int64_t>(rng() % 300)});
  }
  for (const std::string& target : simd_targets()) {
    set_simd_target(target);
    SCOPED_TRACE("target " + target);
    for (size_t s = 0; s < shapes.size(); ++s) {
      const Shape& sh = shapes[s];
      const double alpha = s % 3 == 1 ? -0.5 : 1.0, beta = s % 4 == 2 ? 0.0 : (s % 2) * 0.75;
      const Tensor a =
          gemm_operand(sh.b, sh.m, sh.k, kFloat64, static_cast<int>(rng() % 4), gen, true);
      const Tensor bm =
          gemm_operand(sh.b, sh.k, sh.n, kFloat64, static_cast<int>(rng() % 4), gen, true);
      Tensor out =
          gemm_operand(sh.b, sh.m, sh.n, kFloat64, static_cast<int>(rng() % 3), gen, false);
      if (beta == 0) out.fill_(std::nan(""));
      const Tensor bias =
          s % 2 == 0 ? testing::nn::random_in({sh.n}, kFloat64, Layout::kSliced, gen) : Tensor();
      const LongDoubleProduct want = long_double_product(out, a, bm, alpha, beta, bias);
      std::vector<double> got_one_thread;
      {
        const Tensor before = out.clone();
        const int saved = get_num_threads();
        set_num_threads(1);
        gemm(out, a, bm, alpha, beta, bias);
        got_one_thread = testing::nn::values(out);
        out.copy_(before);  // out's own layout again, for the two-thread run
        set_num_threads(2);
        gemm(out, a, bm, alpha, beta, bias);
        set_num_threads(saved);
      }
      SCOPED_TRACE("B=" + std::to_string(sh.b) + " M=" + std::to_string(sh.m) +
                   " K=" + std::to_string(sh.k) + " N=" + std::to_string(sh.n));
      const std::vector<double> got = testing::nn::values(out);
      ASSERT_EQ(got.size(), want.value.size());
      ASSERT_EQ(std::memcmp(got.data(), got_one_thread.data(), got.size() * sizeof(double)), 0)
          << "two threads gave other bits than one";
      int bad = 0;
      for (size_t e = 0; e < got.size() && bad < 5; ++e) {
        const long double bound =
            4.0L * static_cast<long double>(sh.k + 3) * 0x1p-53L * want.magnitude[e];
        if (!(std::fabs(got[e] - want.value[e]) <= bound)) {
          ADD_FAILURE() << "element " << e << ": got " << got[e] << ", want "
                        << static_cast<double>(want.value[e]) << " (bound "
                        << static_cast<double>(bound) << ")";
          ++bad;
        }
      }
    }
  }
  set_simd_target("");
}

TEST(NnGemm, Float64LoopsMatchAHandComputedProduct) {
  Tensor a = arange(1, 5, 1, kFloat64).view({1, 2, 2});  // [[1, 2], [3, 4]]
  Tensor b = arange(5, 9, 1, kFloat64).view({1, 2, 2});  // [[5, 6], [7, 8]]
  Tensor bias = arange(1, 3, 1, kFloat64);               // [1, 2]
  Tensor out = full({1, 2, 2}, 10.0, kFloat64);
  gemm(out, a, b, 2.0, 0.5, bias);  // 2 * [[19, 22], [43, 50]] + 5 + [1, 2]
  EXPECT_EQ(testing::nn::values(out), (std::vector<double>{44, 51, 92, 107}));
  // The same on the oneDNN path, float32 (exact in float32).
  Tensor out32 = full({1, 2, 2}, 10.0, kFloat32);
  gemm(out32, a.to(kFloat32), b.to(kFloat32), 2.0, 0.5, bias.to(kFloat32));
  EXPECT_EQ(testing::nn::values(out32), (std::vector<double>{44, 51, 92, 107}));
}

TEST(NnGemm, BetaZeroIgnoresNaNsInOut) {
  for (ScalarType dtype : {kFloat32, kBFloat16, kFloat64}) {
    Tensor a = ones({2, 3, 4}, dtype), b = ones({2, 4, 5}, dtype);
    Tensor out = full({2, 3, 5}, std::nan(""), dtype);
    gemm(out, a, b);
    for (double v : testing::nn::values(out)) EXPECT_EQ(v, 4.0) << dtype;
  }
}

TEST(NnGemm, IntegerDtypesRunTheLoopsAndWrap) {
  Tensor a = arange(0, 6, 1, kInt32).view({1, 2, 3}), b = arange(0, 6, 1, kInt32).view({1, 3, 2});
  Tensor out = zeros({1, 2, 2}, kInt32);
  gemm(out, a, b, 2, 1, full({2}, 1, kInt32));
  // [[10, 13], [28, 40]] * 2 + 1
  EXPECT_EQ(testing::nn::values(out), (std::vector<double>{21, 27, 57, 81}));
  Tensor big = full({1, 1, 2}, 100, kInt8), col = full({1, 2, 1}, 2, kInt8);
  Tensor small = zeros({1, 1, 1}, kInt8);
  gemm(small, big, col);  // 400 wraps to -112 in int8
  EXPECT_EQ(testing::nn::values(small), (std::vector<double>{-112}));
  EXPECT_THAT(testing::error_of<DTypeError>([&] { gemm(out, a, b, 0.5); }),
              HasSubstr("integral alpha and beta"));
}

TEST(NnGemm, DegenerateShapes) {
  Tensor out = full({2, 3, 4}, 7.0, kFloat32);
  gemm(out, empty({2, 3, 0}, kFloat32), empty({2, 0, 4}, kFloat32), 1.0, 0.5,
       full({4}, 1.0, kFloat32));
  for (double v : testing::nn::values(out)) EXPECT_EQ(v, 4.5);
  Tensor none = empty({2, 0, 4}, kFloat32);
  gemm(none, empty({2, 0, 3}, kFloat32), empty({2, 3, 4}, kFloat32));  // nothing to do
}

TEST(NnGemm, RepeatedCallsHitThePrimitiveCache) {
  Tensor a = ones({1, 8, 8}), b = ones({1, 8, 8}), out = empty({1, 8, 8});
  gemm(out, a, b);
  const PrimitiveCacheStats before = primitive_cache_stats();
  for (int i = 0; i < 5; ++i) gemm(out, a, b);
  const PrimitiveCacheStats after = primitive_cache_stats();
  EXPECT_EQ(after.misses, before.misses);
  EXPECT_GE(after.hits, before.hits + 5);
}

TEST(NnGemm, TheCacheIsBoundedAndEvictsTheLeastRecentlyUsed) {
  const size_t capacity = primitive_cache_stats().capacity;
  clear_primitive_cache();
  set_primitive_cache_capacity(2);
  auto run = [](int64_t n) {
    Tensor out = empty({1, n, n});
    gemm(out, ones({1, n, n}), ones({1, n, n}));
  };
  run(3);
  run(4);
  run(3);  // 3 is now the most recent
  const PrimitiveCacheStats s0 = primitive_cache_stats();
  run(5);  // evicts 4
  run(3);  // still cached
  const PrimitiveCacheStats s1 = primitive_cache_stats();
  EXPECT_EQ(s1.entries, 2u);
  EXPECT_EQ(s1.evictions, s0.evictions + 1);
  EXPECT_EQ(s1.misses, s0.misses + 1);
  run(4);  // was evicted: a miss
  EXPECT_EQ(primitive_cache_stats().misses, s1.misses + 1);
  set_primitive_cache_capacity(0);
  run(6);
  EXPECT_EQ(primitive_cache_stats().entries, 0u);
  set_primitive_cache_capacity(capacity);
}

TEST(NnGemm, BadShapesAndDtypesRaiseNamingBoth) {
  Tensor a = ones({2, 5, 6}), b = ones({2, 7, 3}), out = empty({2, 5, 3});
  const std::string msg = testing::error_of<ShapeError>([&] { gemm(out, a, b); });
  EXPECT_THAT(msg, HasSubstr("[2, 6, 3]"));
  EXPECT_THAT(msg, HasSubstr("[2, 7, 3]"));
  EXPECT_THAT(testing::error_of<ShapeError>([&] {
                gemm(out, ones({5, 6}), ones({2, 6, 3}));
              }),
              HasSubstr("rank 3"));
  EXPECT_THAT(testing::error_of<ShapeError>([&] {
                gemm(empty({2, 5, 4}), ones({2, 5, 6}), ones({2, 6, 3}));
              }),
              HasSubstr("but got [2, 5, 4]"));
  EXPECT_THAT(testing::error_of<ShapeError>([&] {
                gemm(out, ones({2, 5, 6}), ones({2, 6, 3}), 1, 0, ones({4}));
              }),
              HasSubstr("[3]"));
  EXPECT_THAT(testing::error_of<DTypeError>([&] {
                gemm(out, ones({2, 5, 6}, kFloat64), ones({2, 6, 3}));
              }),
              HasSubstr("but got Float64"));
  EXPECT_THAT(testing::error_of<ShapeError>([&] {
                gemm(empty({1, 5, 3}).expand({2, 5, 3}), ones({2, 5, 6}), ones({2, 6, 3}));
              }),
              HasSubstr("share"));
  EXPECT_THAT(testing::error_of<ShapeError>([&] {
                gemm(out, Tensor(), ones({2, 6, 3}));
              }),
              HasSubstr("undefined"));
}

}  // namespace
}  // namespace ferry::cpu
