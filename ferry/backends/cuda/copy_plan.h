// The CUDA copy kernel's host-side plan and its index geometry, in plain C++ so that both are
// unit-tested without a GPU (tests/cuda/copy_plan_test.cc). plan_cuda_copy picks one of three
// kernels for a CopyProblem:
//  - dense: both operands one unit-stride run (a converting or conj/neg copy between contiguous
//    tensors); each thread converts `vector` consecutive elements, loading and storing them as
//    one aligned vector (16 bytes on the wider side) when both pointers allow it;
//  - transpose: dst unit-stride along dim 0, src along another dim; 32 x 32 tiles go through
//    shared memory so that both the reads (along src's fast dim) and the writes (along dst's)
//    are coalesced; the remaining dims are a batch, one tile grid per batch index;
//  - strided: anything else, and fills: one element per thread through OffsetCalculator.
// The dense and transpose kernels are compiled for the pairs of dtypes has_typed_paths accepts
// (the floating types among themselves, and each non-bool type to itself), so their loops hold
// no dtype switch; other pairs take the strided kernel, which switches on the source's dtype per
// element. Guarantee (tested): a transpose plan's geometry visits every element of the problem
// exactly once, at the byte offsets the problem gives it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>

#include "ferry/core/scalar_type.h"
#include "ferry/iter/copy_problem.h"
#include "ferry/iter/offset_calculator.h"

namespace ferry::cuda {

enum class CudaCopyKind : int8_t { kDense, kTranspose, kStrided };
const char* cuda_copy_kind_name(CudaCopyKind kind);

inline constexpr int kTransposeTile = 32;  // a tile is kTransposeTile x kTransposeTile elements
inline constexpr int kTransposeRows = 8;   // a block is kTransposeTile x kTransposeRows threads
inline constexpr int64_t kMaxGridY = 65535;
inline constexpr int64_t kMaxGridZ = 65535;

// Where a transpose's elements are: dst is unit-stride along dim 0 (`rows` of them), src along
// dim `src_fast_dim` (`cols`); the other dims, in order, form the batch. Byte strides.
struct TransposeGeometry {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t dst_col_stride = 0;  // dst's stride along the src-fast dim
  int64_t src_row_stride = 0;  // src's stride along dim 0
  int64_t dst_item = 0;        // dst's stride along dim 0 (its element size)
  int64_t src_item = 0;        // src's stride along the src-fast dim (its element size)
  int64_t batch = 1;           // elements of the batch dims
  OffsetCalculator<2, uint64_t> batch_offsets;  // batch index -> {dst, src} byte offsets

  FERRY_HOST_DEVICE int64_t tiles_along_rows() const {
    return (rows + kTransposeTile - 1) / kTransposeTile;
  }
  FERRY_HOST_DEVICE int64_t tiles_along_cols() const {
    return (cols + kTransposeTile - 1) / kTransposeTile;
  }
  // Byte offsets of element (row, col) within one batch index's plane.
  FERRY_HOST_DEVICE int64_t dst_offset(int64_t row, int64_t col) const {
    return row * dst_item + col * dst_col_stride;
  }
  FERRY_HOST_DEVICE int64_t src_offset(int64_t row, int64_t col) const {
    return row * src_row_stride + col * src_item;
  }
};

struct CudaCopyPlan {
  CudaCopyKind kind = CudaCopyKind::kStrided;
  int vector = 1;         // kDense: elements per thread per step: 16 bytes on the wider side, or 1
  int src_fast_dim = -1;  // kTranspose
  TransposeGeometry transpose;
  // kTranspose: the grid (x over tiles along rows, y along cols, z over the batch; each loops
  // with its grid's stride beyond these).
  int64_t grid_x = 0, grid_y = 0, grid_z = 0;

  // One line, e.g. "transpose (32x32 tiles, src fast dim 2, 3 batches)".
  std::string describe() const;
};

// Whether the dense and transpose kernels are compiled for copying `src` into `dst`.
bool has_typed_paths(ScalarType dst, ScalarType src);

// The kernel for `problem` (a coalesced copy problem at device addresses, numel() > 0, or a
// fill). Reads the pointers' alignment for the dense kernel's vector width.
CudaCopyPlan plan_cuda_copy(const CopyProblem& problem);

// ---- implementation ----

namespace detail {

inline bool is_floating_kind(ScalarType t) {
  return t == kFloat32 || t == kFloat64 || t == kFloat16 || t == kBFloat16;
}

inline bool aligned(const void* p, int64_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) == 0;
}

}  // namespace detail

inline const char* cuda_copy_kind_name(CudaCopyKind kind) {
  switch (kind) {
    case CudaCopyKind::kDense:
      return "dense";
    case CudaCopyKind::kTranspose:
      return "transpose";
    case CudaCopyKind::kStrided:
      return "strided";
  }
  return "?";
}

inline std::string CudaCopyPlan::describe() const {
  std::ostringstream out;
  out << cuda_copy_kind_name(kind);
  if (kind == CudaCopyKind::kDense) {
    out << " (" << vector << " element" << (vector == 1 ? "" : "s") << " per thread and step)";
  } else if (kind == CudaCopyKind::kTranspose) {
    out << " (" << kTransposeTile << "x" << kTransposeTile << " tiles, src fast dim "
        << src_fast_dim << ", " << transpose.batch << " batch" << (transpose.batch == 1 ? "" : "es")
        << ")";
  } else {
    out << " (one element per thread)";
  }
  return out.str();
}

inline bool has_typed_paths(ScalarType dst, ScalarType src) {
  if (dst == src) return dst != kBool;  // bool loads normalize any nonzero byte: keep them exact
  return detail::is_floating_kind(dst) && detail::is_floating_kind(src);
}

inline CudaCopyPlan plan_cuda_copy(const CopyProblem& p) {
  CudaCopyPlan plan;
  if (p.src_is_value || p.numel() == 0 || !has_typed_paths(p.dst_dtype, p.src_dtype)) return plan;
  const auto dst_item = static_cast<int64_t>(element_size(p.dst_dtype));
  const auto src_item = static_cast<int64_t>(element_size(p.src_dtype));
  const int ndim = p.ndim();
  if (ndim <= 1) {
    const bool dst_unit = ndim == 0 || p.dst_strides[0] == dst_item;
    const bool src_unit = ndim == 0 || p.src_strides[0] == src_item;
    if (!dst_unit || !src_unit) return plan;
    plan.kind = CudaCopyKind::kDense;
    // 16 bytes on the wider side when both pointers sit on their vector's boundary, else one
    // element at a time (the kernel is compiled for these two widths only).
    const int widest = static_cast<int>(std::max(dst_item, src_item));
    const int vector = 16 / widest;
    if (detail::aligned(p.dst, vector * dst_item) && detail::aligned(p.src, vector * src_item)) {
      plan.vector = vector;
    }
    return plan;
  }
  if (p.dst_strides[0] != dst_item || p.src_strides[0] == src_item) return plan;
  int fast = -1;
  for (int d = 1; d < ndim; ++d) {
    if (p.src_strides[static_cast<size_t>(d)] == src_item) {
      fast = d;
      break;
    }
  }
  if (fast < 0 || ndim - 2 > kMaxOffsetDims) return plan;
  const auto at = [](const DimVector& v, int d) { return v[static_cast<size_t>(d)]; };
  TransposeGeometry& g = plan.transpose;
  g.rows = at(p.sizes, 0);
  g.cols = at(p.sizes, fast);
  g.dst_col_stride = at(p.dst_strides, fast);
  g.src_row_stride = at(p.src_strides, 0);
  g.dst_item = dst_item;
  g.src_item = src_item;
  int64_t sizes[kMaxOffsetDims];
  int64_t dst_strides[kMaxOffsetDims];
  int64_t src_strides[kMaxOffsetDims];
  int batch_dims = 0;
  for (int d = 1; d < ndim; ++d) {
    if (d == fast) continue;
    sizes[batch_dims] = at(p.sizes, d);
    dst_strides[batch_dims] = at(p.dst_strides, d);
    src_strides[batch_dims] = at(p.src_strides, d);
    g.batch *= sizes[batch_dims];
    ++batch_dims;
  }
  const int64_t* strides[2] = {dst_strides, src_strides};
  g.batch_offsets = OffsetCalculator<2, uint64_t>(batch_dims, sizes, strides);
  plan.kind = CudaCopyKind::kTranspose;
  plan.src_fast_dim = fast;
  plan.grid_x = std::min<int64_t>(g.tiles_along_rows(), int64_t{1} << 20);
  plan.grid_y = std::min(g.tiles_along_cols(), kMaxGridY);
  plan.grid_z = std::min(g.batch, kMaxGridZ);
  return plan;
}

}  // namespace ferry::cuda
