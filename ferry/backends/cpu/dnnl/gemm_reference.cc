// The portable GEMM: float64 (oneDNN has no f64), integer dtypes, and the degenerate shapes
// (K == 0) of every dtype. float64 goes through the packed, register-tiled kernel of gemm_f64.h
// in blocks of the output split over ferry's pool; the others accumulate in float or wrapping
// 64-bit integers, a row of the output at a time, rows of all batches split over the pool.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ferry/backends/cpu/dnnl/nn_reference.h"
#include "ferry/backends/cpu/dnnl/nn_support.h"
#include "ferry/backends/cpu/gemm_f64.h"
#include "ferry/iter/parallel.h"

namespace ferry::cpu::reference {
namespace {

template <typename Acc, typename T>
Acc widen(T v) {
  if constexpr (std::is_integral_v<Acc>) {
    return static_cast<Acc>(static_cast<int64_t>(v));  // modular: negative values wrap
  } else {
    return static_cast<Acc>(v);
  }
}

template <typename Acc>
Acc scalar_as(double v) {
  if constexpr (std::is_integral_v<Acc>) {
    return static_cast<Acc>(static_cast<int64_t>(v));
  } else {
    return static_cast<Acc>(v);
  }
}

template <typename T>
void gemm_loop(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta,
               const Tensor& bias) {
  using Acc = nn::acc_t<T>;
  const int64_t batches = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  T* o = static_cast<T*>(out.data_ptr());
  const T* pa = static_cast<const T*>(a.const_data_ptr());
  const T* pb = static_cast<const T*>(b.const_data_ptr());
  const T* pbias = bias.defined() ? static_cast<const T*>(bias.const_data_ptr()) : nullptr;
  const int64_t os0 = out.stride(0), os1 = out.stride(1), os2 = out.stride(2);
  const int64_t as0 = a.stride(0), as1 = a.stride(1), as2 = a.stride(2);
  const int64_t bs0 = b.stride(0), bs1 = b.stride(1), bs2 = b.stride(2);
  const int64_t bias_stride = bias.defined() ? bias.stride(0) : 0;
  const Acc alpha_acc = scalar_as<Acc>(alpha);
  const Acc beta_acc = scalar_as<Acc>(beta);
  parallel_for(0, batches * m, nn::grain_for(n * std::max<int64_t>(k, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t row = begin; row < end; ++row) {
                   const int64_t bi = row / m, i = row % m;
                   const T* arow = pa + bi * as0 + i * as1;
                   const T* bmat = pb + bi * bs0;
                   T* orow = o + bi * os0 + i * os1;
                   for (int64_t j = 0; j < n; ++j) {
                     Acc sum = 0;
                     for (int64_t kk = 0; kk < k; ++kk) {
                       sum += widen<Acc>(arow[kk * as2]) * widen<Acc>(bmat[kk * bs1 + j * bs2]);
                     }
                     Acc r = alpha_acc * sum;
                     if (beta != 0) r += beta_acc * widen<Acc>(orow[j * os2]);
                     if (pbias) r += widen<Acc>(pbias[j * bias_stride]);
                     orow[j * os2] = static_cast<T>(r);
                   }
                 }
               });
}

// How many row blocks each matrix is cut into when `items` blocks of columns (over all matrices)
// go to `threads` threads. Every row block packs b's columns again, so as few as keep the threads
// evenly busy: the first count at which the pool's equal chunks of blocks leave at most a fifth
// of the threads' time idle (one block per matrix at one thread).
int64_t gemm_f64_row_blocks(int64_t items, int64_t m, int threads) {
  const int64_t most = (m + kernels::kGemmTileRows - 1) / kernels::kGemmTileRows;
  for (int64_t splits = 1; splits < most; ++splits) {
    const int64_t blocks = items * splits;
    const int64_t per_thread = (blocks + threads - 1) / threads;
    if (blocks * 5 >= per_thread * threads * 4) return splits;
  }
  return most;
}

// The matrices of a batch (`batches` of them, each operand's batch stride apart), each cut into
// blocks of at most kGemmBlockCols columns and of rows that start on multiples of the kernel's
// tile (only a matrix's last rows make a partial tile), every block of every matrix one item of
// the pool. Each element sums over k in the same order however the rows are split, so the
// result does not depend on the thread count.
void gemm_f64_batches(const kernels::GemmBlockF64& g, int64_t batches, int64_t a_batch_stride,
                      int64_t b_batch_stride, int64_t c_batch_stride) {
  using kernels::kGemmBlockCols;
  using kernels::kGemmTileRows;
  if (batches <= 0 || g.m <= 0 || g.n <= 0) return;
  const int64_t col_blocks = (g.n + kGemmBlockCols - 1) / kGemmBlockCols;
  const int threads = region_threads();
  const int64_t splits = gemm_f64_row_blocks(batches * col_blocks, g.m, threads);
  const int64_t block_rows =
      ((g.m + splits - 1) / splits + kGemmTileRows - 1) / kGemmTileRows * kGemmTileRows;
  const int64_t row_blocks = (g.m + block_rows - 1) / block_rows;
  parallel_for(0, batches * row_blocks * col_blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t index = begin; index < end; ++index) {
      const int64_t bi = index / (row_blocks * col_blocks);
      const int64_t i0 = index / col_blocks % row_blocks * block_rows;
      const int64_t j0 = index % col_blocks * kGemmBlockCols;
      kernels::GemmBlockF64 block = g;
      block.a = g.a + bi * a_batch_stride + i0 * g.a_row_stride;
      block.b = g.b + bi * b_batch_stride + j0 * g.b_col_stride;
      block.c = g.c + bi * c_batch_stride + i0 * g.c_row_stride + j0 * g.c_col_stride;
      block.m = std::min(block_rows, g.m - i0);
      block.n = std::min(kGemmBlockCols, g.n - j0);
      if (g.bias != nullptr) block.bias = g.bias + j0 * g.bias_stride;
      kernels::gemm_f64_block(block);
    }
  });
}

// float64 with k > 0, on [B, M, K] x [B, K, N] tensors.
void gemm_f64(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta,
              const Tensor& bias) {
  kernels::GemmBlockF64 g{};
  g.a = static_cast<const double*>(a.const_data_ptr());
  g.a_row_stride = a.stride(1), g.a_col_stride = a.stride(2);
  g.b = static_cast<const double*>(b.const_data_ptr());
  g.b_row_stride = b.stride(1), g.b_col_stride = b.stride(2);
  g.c = static_cast<double*>(out.data_ptr());
  g.c_row_stride = out.stride(1), g.c_col_stride = out.stride(2);
  g.m = out.size(1), g.n = out.size(2), g.k = a.size(2);
  g.alpha = alpha, g.beta = beta;
  g.bias = bias.defined() ? static_cast<const double*>(bias.const_data_ptr()) : nullptr;
  g.bias_stride = bias.defined() ? bias.stride(0) : 0;
  gemm_f64_batches(g, out.size(0), a.stride(0), b.stride(0), out.stride(0));
}

}  // namespace

void gemm_f64_matrix(const kernels::GemmBlockF64& g) { gemm_f64_batches(g, 1, 0, 0, 0); }

void gemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta,
          const Tensor& bias) {
  const ScalarType dtype = out.dtype();
  if (is_integral(dtype)) {
    const auto integral = [](double v) {
      return std::isfinite(v) && v == std::trunc(v) && std::fabs(v) < 0x1p63;
    };
    FERRY_CHECK_AS(DTypeError, integral(alpha) && integral(beta),
                   "gemm: expected integral alpha and beta for an integer dtype (", dtype,
                   "), but got alpha=", alpha, ", beta=", beta);
  }
  switch (dtype) {
    case kUInt8:
      return gemm_loop<uint8_t>(out, a, b, alpha, beta, bias);
    case kInt8:
      return gemm_loop<int8_t>(out, a, b, alpha, beta, bias);
    case kInt16:
      return gemm_loop<int16_t>(out, a, b, alpha, beta, bias);
    case kInt32:
      return gemm_loop<int32_t>(out, a, b, alpha, beta, bias);
    case kInt64:
      return gemm_loop<int64_t>(out, a, b, alpha, beta, bias);
    case kFloat64:
      if (a.size(2) > 0) return gemm_f64(out, a, b, alpha, beta, bias);
      return gemm_loop<double>(out, a, b, alpha, beta, bias);
    default:
      nn::dispatch_floating(
          dtype, "gemm", [&](auto tag) { gemm_loop<decltype(tag)>(out, a, b, alpha, beta, bias); });
  }
}

}  // namespace ferry::cpu::reference
