// The float64 matrix product for the portable GEMM (oneDNN 2.6 has no f64): one block of
// c = alpha * a b + beta * c + bias, any strides, on the SIMD target the copy kernels use
// (simd.h). The caller splits the output into blocks over its threads; a block packs its panels
// of a and b into thread-local buffers and runs a register-tiled kernel over them. c is read
// only when beta != 0 (as in BLAS: with beta 0, NaN in c does not propagate). No Highway types
// here.
#pragma once

#include <cstdint>

namespace ferry::cpu::kernels {

// One block of the product: a is m x k, b is k x n, c and the result m x n; strides in elements
// (rows, then columns); bias (n elements, bias_stride apart) or nullptr. The block may be any
// size; blocks of at most kGemmBlockCols columns keep the packed panels in the caches, and
// blocks that start on a multiple of kGemmTileRows rows leave partial register tiles to the
// matrix's last rows. An element's sum runs over k in the same order in any block.
struct GemmBlockF64 {
  const double* a;
  int64_t a_row_stride, a_col_stride;
  const double* b;
  int64_t b_row_stride, b_col_stride;
  double* c;
  int64_t c_row_stride, c_col_stride;
  int64_t m, n, k;
  double alpha, beta;
  const double* bias;
  int64_t bias_stride;
};

// Row blocks start on multiples of this: whole register tiles on every target (6 or 8 rows).
inline constexpr int64_t kGemmTileRows = 24;
// Columns of a block: b's packed slice of them (kGemmBlockCols x 128 values) stays in L2.
inline constexpr int64_t kGemmBlockCols = 256;

void gemm_f64_block(const GemmBlockF64& block);

}  // namespace ferry::cpu::kernels
