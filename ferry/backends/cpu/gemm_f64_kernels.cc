// gemm_f64_block (gemm_f64.h), compiled once per SIMD target. The block's k is walked in slices of
// kDepth; each slice packs b into panels of kVecs vectors of columns and a into panels of kRows
// rows (two interleaved halves), both zero-padded to whole panels, and a kernel keeps a kRows x
// kVecs-vector tile of c in registers while it runs down the slice (8 x 3 on AVX-512, 6 x 2
// elsewhere): per step, kVecs vector loads of b, kRows broadcasts of a and kRows x kVecs fused
// multiply-adds. The first slice writes c (with beta and the bias), the others add to it, so no
// buffer of c is kept; a full tile over contiguous columns of c is written from the registers,
// any other through a small buffer, element by element.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ferry/backends/cpu/gemm_f64_kernels.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ferry/backends/cpu/gemm_f64.h"
#include "ferry/backends/cpu/hwy_dispatch.h"

HWY_BEFORE_NAMESPACE();
namespace ferry::cpu::HWY_NAMESPACE {
namespace {

namespace hn = hwy::HWY_NAMESPACE;

// The register tile: kRows x kVecs vectors of c. AVX-512 has 32 vector registers: 8 x 3 (24
// accumulators, 3 of b, a broadcast); the others have 16: 6 x 2.
#if HWY_TARGET <= HWY_AVX3
constexpr int64_t kRows = 8;
constexpr int64_t kVecs = 3;
#else
constexpr int64_t kRows = 6;
constexpr int64_t kVecs = 2;
#endif
static_assert(kernels::kGemmTileRows % kRows == 0, "row blocks start on whole tiles");
constexpr int64_t kDepth = 128;   // k per packed slice: a b panel of kDepth x kVecs vectors in L1
constexpr int64_t kRowSlab = 72;  // rows of a packed together (kRows apart): 72 KiB, in L2
static_assert(kRowSlab % kRows == 0, "a slab is whole tiles");

using D = hn::ScalableTag<double>;

// The packed panels of one thread, reused from block to block.
struct Panels {
  std::vector<double> a, b, tile, bias;
};

Panels& panels() {
  thread_local Panels p;
  return p;
}

// b[p0 + p][j0 + j] for p < depth, j < cols, as panels of `width` columns: panel q holds
// columns q*width.. as depth rows of `width` values, zeros past the block's last column.
void PackB(const kernels::GemmBlockF64& g, int64_t p0, int64_t depth, int64_t width, double* out) {
  const D d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t j0 = 0; j0 < g.n; j0 += width) {
    const int64_t cols = std::min(width, g.n - j0);
    for (int64_t p = 0; p < depth; ++p) {
      const double* row = g.b + (p0 + p) * g.b_row_stride + j0 * g.b_col_stride;
      double* dst = out + p * width;
      if (g.b_col_stride == 1 && cols == width) {  // width is kVecs vectors
        for (int64_t v = 0; v < kVecs; ++v) hn::StoreU(hn::LoadU(d, row + v * n), d, dst + v * n);
        continue;
      }
      if (g.b_col_stride == 1) {
        std::copy(row, row + cols, dst);
      } else {
        for (int64_t j = 0; j < cols; ++j) dst[j] = row[j * g.b_col_stride];
      }
      std::fill(dst + cols, dst + width, 0.0);
    }
    out += depth * width;
  }
}

// a[i0 + i][p0 + p] for i < rows, p < depth, as panels of kRows rows, zeros past the slab's last
// row. A panel is two halves of kHalf rows, each depth steps of kHalf values: panel[p * kHalf +
// i] holds row i and panel[(depth + p) * kHalf + i - kHalf] row i >= kHalf. Rows of a along
// which it is contiguous are packed a vector of steps at a time, kHalf rows interleaved.
constexpr int64_t kHalf = kRows / 2;

static_assert(kHalf == 3 || kHalf == 4, "half-panels of three or four rows");

void PackA(const kernels::GemmBlockF64& g, int64_t i0, int64_t rows, int64_t p0, int64_t depth,
           double* out) {
  const D d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
    const int64_t live = std::min(kRows, rows - r0);
    const double* src = g.a + (i0 + r0) * g.a_row_stride + p0 * g.a_col_stride;
    int64_t p = 0;
    if (live == kRows && g.a_col_stride == 1) {
      const int64_t rs = g.a_row_stride;
      for (; p + n <= depth; p += n) {
        const double* s = src + p;
        const double* t = s + kHalf * rs;
        if constexpr (kHalf == 3) {
          hn::StoreInterleaved3(hn::LoadU(d, s), hn::LoadU(d, s + rs), hn::LoadU(d, s + 2 * rs), d,
                                out + p * kHalf);
          hn::StoreInterleaved3(hn::LoadU(d, t), hn::LoadU(d, t + rs), hn::LoadU(d, t + 2 * rs), d,
                                out + (depth + p) * kHalf);
        } else {
          hn::StoreInterleaved4(hn::LoadU(d, s), hn::LoadU(d, s + rs), hn::LoadU(d, s + 2 * rs),
                                hn::LoadU(d, s + 3 * rs), d, out + p * kHalf);
          hn::StoreInterleaved4(hn::LoadU(d, t), hn::LoadU(d, t + rs), hn::LoadU(d, t + 2 * rs),
                                hn::LoadU(d, t + 3 * rs), d, out + (depth + p) * kHalf);
        }
      }
    }
    for (int64_t i = 0; i < kRows; ++i) {  // the steps left, and rows past the slab's end
      double* half = out + (i < kHalf ? 0 : depth * kHalf) + i % kHalf;
      if (i < live) {
        const double* row = src + i * g.a_row_stride;
        for (int64_t q = p; q < depth; ++q) half[q * kHalf] = row[q * g.a_col_stride];
      } else {
        for (int64_t q = p; q < depth; ++q) half[q * kHalf] = 0.0;
      }
    }
    out += depth * kRows;
  }
}

// How a tile's sums reach c: out = alpha * sum, plus beta * out and the bias on the first slice
// of k, plus out on the others. bias points at the tile's first column, contiguous, or is null.
struct Epilogue {
  double alpha, beta;
  bool first;
  const double* bias;
};

using V = hn::Vec<D>;

// One row of a full tile, straight from the registers: c's columns are contiguous.
HWY_INLINE void StoreRow(D d, const V* s, double* HWY_RESTRICT c, const Epilogue& e) {
  const size_t n = hn::Lanes(d);
  const V alpha = hn::Set(d, e.alpha);
  HWY_UNROLL(4)
  for (int64_t v = 0; v < kVecs; ++v) {
    double* cv = c + v * n;
    V r = hn::Mul(alpha, s[v]);
    if (e.first) {
      if (e.beta != 0) r = hn::MulAdd(hn::Set(d, e.beta), hn::LoadU(d, cv), r);
      if (e.bias != nullptr) r = hn::Add(r, hn::LoadU(d, e.bias + v * n));
    } else {
      r = hn::Add(r, hn::LoadU(d, cv));
    }
    hn::StoreU(r, d, cv);
  }
}

// The kRows x kVecs-vector tile of a_panel b_panel over `depth` steps. With `c` set (a full tile
// whose columns are contiguous in c) the sums go to c through the epilogue; else into `tile`
// (row-major, kVecs * Lanes per row; always a valid buffer) for the caller's element-wise
// epilogue. The loops over rows and vectors are unrolled whole, so the accumulators live in
// registers.
HWY_NOINLINE void Tile(int64_t depth, const double* HWY_RESTRICT a, const double* HWY_RESTRICT b,
                       double* HWY_RESTRICT tile, double* HWY_RESTRICT c, int64_t c_row_stride,
                       const Epilogue& e) {
  const D d;
  const size_t n = hn::Lanes(d);
  V acc[kRows][kVecs];
  HWY_UNROLL(8)
  for (int64_t r = 0; r < kRows; ++r) {
    HWY_UNROLL(4)
    for (int64_t v = 0; v < kVecs; ++v) acc[r][v] = hn::Zero(d);
  }
  const double* HWY_RESTRICT lo = a;                  // rows 0 .. kHalf-1 (PackA's half-panels)
  const double* HWY_RESTRICT hi = a + depth * kHalf;  // rows kHalf ..
  for (int64_t p = 0; p < depth; ++p) {
    V bv[kVecs];
    HWY_UNROLL(4)
    for (int64_t v = 0; v < kVecs; ++v) bv[v] = hn::LoadU(d, b + v * n);
    HWY_UNROLL(8)
    for (int64_t r = 0; r < kRows; ++r) {
      const V x = hn::Set(d, r < kHalf ? lo[r] : hi[r - kHalf]);
      HWY_UNROLL(4)
      for (int64_t v = 0; v < kVecs; ++v) acc[r][v] = hn::MulAdd(x, bv[v], acc[r][v]);
    }
    lo += kHalf;
    hi += kHalf;
    b += kVecs * n;
  }
  if (c != nullptr) {
    HWY_UNROLL(8)
    for (int64_t r = 0; r < kRows; ++r) StoreRow(d, acc[r], c + r * c_row_stride, e);
    return;
  }
  HWY_UNROLL(8)
  for (int64_t r = 0; r < kRows; ++r) {
    HWY_UNROLL(4)
    for (int64_t v = 0; v < kVecs; ++v) hn::StoreU(acc[r][v], d, tile + (r * kVecs + v) * n);
  }
}

}  // namespace

void GemmF64Block(const kernels::GemmBlockF64& g) {
  const D d;
  const int64_t width = kVecs * static_cast<int64_t>(hn::Lanes(d));
  const int64_t col_panels = (g.n + width - 1) / width;
  Panels& buf = panels();
  const int64_t depth_max = std::min(kDepth, g.k);
  buf.b.resize(static_cast<size_t>(col_panels * width * depth_max));
  const int64_t slab_rows = (std::min(kRowSlab, g.m) + kRows - 1) / kRows * kRows;
  buf.a.resize(static_cast<size_t>(slab_rows * depth_max));
  buf.tile.resize(static_cast<size_t>(kRows * width));
  // The bias gathered contiguous, for the vector epilogue.
  buf.bias.clear();
  if (g.bias != nullptr) {
    for (int64_t j = 0; j < g.n; ++j) buf.bias.push_back(g.bias[j * g.bias_stride]);
  }
  double* tile = buf.tile.data();
  for (int64_t p0 = 0; p0 < g.k; p0 += kDepth) {
    const int64_t depth = std::min(kDepth, g.k - p0);
    Epilogue e{g.alpha, g.beta, p0 == 0, nullptr};
    PackB(g, p0, depth, width, buf.b.data());
    for (int64_t i0 = 0; i0 < g.m; i0 += kRowSlab) {
      const int64_t rows = std::min(kRowSlab, g.m - i0);
      PackA(g, i0, rows, p0, depth, buf.a.data());
      for (int64_t q = 0; q < col_panels; ++q) {
        const int64_t j0 = q * width;
        const int64_t cols = std::min(width, g.n - j0);
        const double* b_panel = buf.b.data() + q * width * depth;
        e.bias = g.bias != nullptr ? buf.bias.data() + j0 : nullptr;
        for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
          const int64_t live = std::min(kRows, rows - r0);
          double* c = g.c + (i0 + r0) * g.c_row_stride + j0 * g.c_col_stride;
          if (live == kRows && cols == width && g.c_col_stride == 1) {
            Tile(depth, buf.a.data() + r0 * depth, b_panel, tile, c, g.c_row_stride, e);
            continue;
          }
          Tile(depth, buf.a.data() + r0 * depth, b_panel, tile, nullptr, 0, e);
          for (int64_t i = 0; i < live; ++i) {
            double* row = c + i * g.c_row_stride;
            const double* t = tile + i * width;
            for (int64_t j = 0; j < cols; ++j) {
              double& out = row[j * g.c_col_stride];
              double v = g.alpha * t[j];
              if (e.first) {
                if (g.beta != 0) v += g.beta * out;
                if (e.bias != nullptr) v += e.bias[j];
              } else {
                v += out;
              }
              out = v;
            }
          }
        }
      }
    }
  }
}

}  // namespace ferry::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ferry::cpu {

HWY_EXPORT(GemmF64Block);

namespace kernels {

void gemm_f64_block(const GemmBlockF64& block) {
  if (block.m <= 0 || block.n <= 0) return;
  FERRY_DISPATCH(GemmF64Block)(block);
}

}  // namespace kernels
}  // namespace ferry::cpu
#endif  // HWY_ONCE
