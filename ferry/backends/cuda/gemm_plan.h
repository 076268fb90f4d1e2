// How a batched row-major GEMM (out[B, M, N] = a[B, M, K] @ b[B, K, N], any element strides)
// maps onto cuBLAS's column-major cublasGemmStridedBatchedEx, in plain C++ so that it is
// unit-tested on the host against a column-major emulation. A matrix is expressible when one of
// its two strides is 1 and the other a valid leading dimension; an output with unit column
// stride is computed as out^T = b^T a^T (cuBLAS's A is then b), one with unit row stride as
// out = a b. Operands that are not expressible are staged (dense copies) by the caller.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

namespace ferry::cuda {

// A rows x cols matrix with element strides (row_stride, col_stride) as cuBLAS sees it: `ok`
// when expressible; `row_major` when it is the transpose of a column-major matrix with leading
// dimension ld (col_stride == 1), else column-major with leading dimension ld (row_stride == 1).
struct BlasMatrix {
  bool ok = false;
  bool row_major = false;
  int64_t ld = 0;
};

inline BlasMatrix blas_matrix(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  constexpr int64_t kMaxLd = std::numeric_limits<int>::max();
  const int64_t r = std::max<int64_t>(rows, 1), c = std::max<int64_t>(cols, 1);
  // Row-major: element (i, j) at i * ld + j.
  if (col_stride == 1 || cols <= 1) {
    const int64_t ld = rows <= 1 ? c : row_stride;
    if (ld >= c && ld <= kMaxLd) return {true, true, ld};
  }
  // Column-major: element (i, j) at i + j * ld.
  if (row_stride == 1 || rows <= 1) {
    const int64_t ld = cols <= 1 ? r : col_stride;
    if (ld >= r && ld <= kMaxLd) return {true, false, ld};
  }
  return {};
}

// One cublasGemmStridedBatchedEx call: C (m x n, column-major, ldc) = op(A) op(B), where
// cuBLAS's A and B are ferry's b and a when `swapped` (out computed as its transpose).
struct GemmPlan {
  bool swapped = false;
  bool trans_a = false;  // cuBLAS's op(A) is A^T
  bool trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // batch strides (elements)
};

// The strides of each operand are [batch, row, col] in elements; `out`, `a`, `b` must be
// expressible (blas_matrix(...).ok) — the caller stages them otherwise.
struct GemmShape {
  int64_t batch, m, n, k;
};
inline GemmPlan plan_gemm(const GemmShape& s, const int64_t* out, const int64_t* a,
                          const int64_t* b) {
  const BlasMatrix mo = blas_matrix(s.m, s.n, out[1], out[2]);
  const BlasMatrix ma = blas_matrix(s.m, s.k, a[1], a[2]);
  const BlasMatrix mb = blas_matrix(s.k, s.n, b[1], b[2]);
  GemmPlan p;
  p.k = s.k;
  p.ldc = mo.ld;
  p.stride_c = s.batch > 1 ? out[0] : 0;
  const int64_t sa = s.batch > 1 ? a[0] : 0, sb = s.batch > 1 ? b[0] : 0;
  if (mo.row_major) {
    // out (row-major) is out^T (n x m) column-major: out^T = b^T a^T. A row-major matrix is its
    // transpose in column-major memory, so b^T needs no transpose when b is row-major.
    p.swapped = true;
    p.m = s.n;
    p.n = s.m;
    p.trans_a = !mb.row_major;
    p.lda = mb.ld;
    p.stride_a = sb;
    p.trans_b = !ma.row_major;
    p.ldb = ma.ld;
    p.stride_b = sa;
  } else {
    p.m = s.m;
    p.n = s.n;
    p.trans_a = ma.row_major;
    p.lda = ma.ld;
    p.stride_a = sa;
    p.trans_b = mb.row_major;
    p.ldb = mb.ld;
    p.stride_b = sb;
  }
  return p;
}

}  // namespace ferry::cuda
