// The CUDA GEMM's mapping onto cuBLAS (ferry/backends/cuda/gemm_plan.h), run without a GPU: for
// random shapes and layouts (row- and column-major operands, padded leading dimensions, size-1
// dims with odd strides, broadcast batches), executing the plan with a host emulation of
// cublasGemmStridedBatchedEx's column-major semantics gives the row-major product.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "ferry/backends/cuda/gemm_plan.h"
#include "tests/support/random.h"

namespace ferry::testing {
namespace {

using cuda::blas_matrix;
using cuda::GemmPlan;
using cuda::plan_gemm;

// cuBLAS's column-major C = op(A) op(B), batched, on host arrays.
void emulate(const GemmPlan& p, int64_t batch, const double* a, const double* b, double* c) {
  for (int64_t bi = 0; bi < batch; ++bi) {
    const double* A = a + bi * p.stride_a;
    const double* B = b + bi * p.stride_b;
    double* C = c + bi * p.stride_c;
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t j = 0; j < p.n; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < p.k; ++l) {
          const double av = p.trans_a ? A[l + i * p.lda] : A[i + l * p.lda];
          const double bv = p.trans_b ? B[j + l * p.ldb] : B[l + j * p.ldb];
          sum += av * bv;
        }
        C[i + j * p.ldc] = sum;
      }
    }
  }
}

struct Operand {
  int64_t strides[3];
  std::vector<double> data;
};

// A [batch, rows, cols] operand: row- or column-major with a padded leading dimension, a batch
// stride of 0 when broadcast; values at its offsets, the rest NaN (so stray reads show).
Operand make(int64_t batch, int64_t rows, int64_t cols, bool row_major, int64_t pad, bool broadcast,
             std::mt19937_64& rng) {
  Operand o;
  const int64_t ld = (row_major ? cols : rows) + pad;
  o.strides[1] = row_major ? ld : 1;
  o.strides[2] = row_major ? 1 : ld;
  // A size-1 dim's stride is free: give it an odd value.
  if (rows == 1) o.strides[1] = 7 + pad;
  if (cols == 1) o.strides[2] = 5 + pad;
  const int64_t matrix = (row_major ? rows : cols) * ld + 8;
  o.strides[0] = broadcast ? 0 : matrix;
  o.data.assign(static_cast<size_t>(matrix * (broadcast ? 1 : batch) + 64),
                std::numeric_limits<double>::quiet_NaN());
  std::uniform_int_distribution<int> value(-4, 4);
  for (int64_t b = 0; b < (broadcast ? 1 : batch); ++b) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        o.data[static_cast<size_t>(b * o.strides[0] + i * o.strides[1] + j * o.strides[2])] =
            value(rng);
      }
    }
  }
  return o;
}

double at(const Operand& o, int64_t b, int64_t i, int64_t j) {
  return o.data[static_cast<size_t>(b * o.strides[0] + i * o.strides[1] + j * o.strides[2])];
}

TEST(CudaGemmPlan, PlansGiveTheRowMajorProduct) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  for (int trial = 0; trial < 400; ++trial) {
    const int64_t batch = 1 + static_cast<int64_t>(rng() % 3);
    const int64_t m = 1 + static_cast<int64_t>(rng() % 5), n = 1 + static_cast<int64_t>(rng() % 5);
    const int64_t k = 1 + static_cast<int64_t>(rng() % 5);
    const Operand a =
        make(batch, m, k, rng() % 2, static_cast<int64_t>(rng() % 3), rng() % 4 == 0, rng);
    const Operand b =
        make(batch, k, n, rng() % 2, static_cast<int64_t>(rng() % 3), rng() % 4 == 0, rng);
    Operand out = make(batch, m, n, rng() % 2, static_cast<int64_t>(rng() % 3), false, rng);
    for (const Operand* o : std::initializer_list<const Operand*>{&a, &b, &out}) {
      const int64_t rows = o == &a ? m : o == &b ? k : m, cols = o == &a ? k : n;
      ASSERT_TRUE(blas_matrix(rows, cols, o->strides[1], o->strides[2]).ok) << "trial " << trial;
    }
    const GemmPlan p = plan_gemm({batch, m, n, k}, out.strides, a.strides, b.strides);
    std::vector<double> result = out.data;
    emulate(p, batch, p.swapped ? b.data.data() : a.data.data(),
            p.swapped ? a.data.data() : b.data.data(), result.data());
    out.data = result;
    for (int64_t bi = 0; bi < batch; ++bi) {
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double expected = 0;
          for (int64_t l = 0; l < k; ++l) expected += at(a, bi, i, l) * at(b, bi, l, j);
          ASSERT_EQ(at(out, bi, i, j), expected)
              << "trial " << trial << " batch " << bi << " (" << i << ", " << j << "), m " << m
              << " n " << n << " k " << k << (p.swapped ? " swapped" : "");
        }
      }
    }
  }
}

TEST(CudaGemmPlan, ExpressibleLayouts) {
  // Row-major, column-major, and their padded forms.
  EXPECT_TRUE(blas_matrix(3, 4, 4, 1).ok);
  EXPECT_TRUE(blas_matrix(3, 4, 4, 1).row_major);
  EXPECT_EQ(blas_matrix(3, 4, 6, 1).ld, 6);
  EXPECT_TRUE(blas_matrix(3, 4, 1, 3).ok);
  EXPECT_FALSE(blas_matrix(3, 4, 1, 3).row_major);
  // Neither stride 1, or a leading dimension too small (overlapping rows), or a broadcast.
  EXPECT_FALSE(blas_matrix(3, 4, 8, 2).ok);
  EXPECT_FALSE(blas_matrix(3, 4, 2, 1).ok);
  EXPECT_FALSE(blas_matrix(3, 4, 0, 1).ok);
  // Vectors: any stride on the size-1 side.
  EXPECT_TRUE(blas_matrix(1, 4, 100, 1).ok);
  EXPECT_TRUE(blas_matrix(4, 1, 1, 0).ok);
  // Leading dimensions beyond int are refused.
  EXPECT_FALSE(blas_matrix(3, 4, int64_t{1} << 32, 1).ok);
}

}  // namespace
}  // namespace ferry::testing
