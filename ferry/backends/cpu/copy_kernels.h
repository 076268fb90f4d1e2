// The CPU copy kernels behind run_copy (internal to ferry/backends/cpu): contiguous conversion,
// streaming copy and fill, tile transposes, gathers and strided runs. Every kernel stores exactly
// ferry::convert_value's bits, then applies conj/neg as described below. Pointers need no
// alignment, not even to the element size. No Highway types here: the SIMD code is private.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ferry/core/scalar_type.h"

namespace ferry::cpu::kernels {

// Note [conj and neg]: applied after the conversion, in the destination dtype. conj flips the
// sign of a complex value's imaginary part and is a no-op on real dtypes. neg is IEEE negation
// on floating dtypes (the sign bit flips, NaNs included, so it is exact and never rounds),
// two's-complement negation with wrap-around on integers, and a no-op on bool (-true is true).
struct ConjNeg {
  bool conj = false;
  bool neg = false;
  bool any() const { return conj || neg; }
};

// Whether conj/neg change anything for values of dtype `t`.
inline ConjNeg effective_conj_neg(ScalarType t, bool conj, bool neg) {
  return ConjNeg{conj && is_complex(t), neg && t != kBool};
}

// Applies conj/neg in place to n contiguous elements of dtype t.
void apply_conj_neg(ScalarType t, void* data, int64_t n, ConjNeg flags);

// Note [streaming stores]: a `stream` argument asks for non-temporal stores of the output, worth
// it for outputs much larger than the caches (they skip reading dst lines in first). Kernels do
// not fence them; whoever hands the output to another thread calls stream_fence() first.
void stream_fence();

// dst[0..n) = convert(src[0..n)), both contiguous, then conj/neg; `stream` as above.
void convert_contiguous(ScalarType dst_t, ScalarType src_t, void* dst, const void* src, int64_t n,
                        ConjNeg flags = {}, bool stream = false);

// The vectorized subset of convert_contiguous (no conj/neg); false (nothing written) when the
// pair has no SIMD kernel on this target.
bool convert_simd(ScalarType dst_t, ScalarType src_t, void* dst, const void* src, int64_t n,
                  bool stream);

// memcpy, with non-temporal stores when `stream`.
void copy_bytes(void* dst, const void* src, size_t bytes, bool stream);
// `rows` rows of `bytes` each, dst_stride and src_stride apart, with non-temporal stores (as
// copy_bytes with `stream`).
void stream_rows(char* dst, int64_t dst_stride, const char* src, int64_t src_stride, size_t bytes,
                 int64_t rows);

// Writes n copies of the elem_size-byte value at `value` to contiguous dst (elem_size in
// {1, 2, 4, 8, 16}), with non-temporal stores when `stream`.
void fill_contiguous(void* dst, const void* value, size_t elem_size, int64_t n, bool stream);

// One run along a dimension: dst[k * dst_stride] = convert(src[k * src_stride]) for k < n,
// strides in bytes (src_stride may be 0). Handles every case; fast when one side is contiguous.
// `stream` applies to a contiguous dst.
void strided_run(ScalarType dst_t, ScalarType src_t, char* dst, int64_t dst_stride, const char* src,
                 int64_t src_stride, int64_t n, ConjNeg flags, bool stream = false);

// Same dtype, contiguous dst, src every second element: n elements. False when not vectorized.
bool gather_stride2_simd(size_t elem_size, void* dst, const void* src, int64_t n, bool stream);

// Same dtype, `planes` (2, 3 or 4) rows of n elements of elem_size bytes (1, 2, 4 or 8), `stride`
// bytes apart, to and from one packed row of n tuples (NCHW <-> NHWC with 3 channels: a row per
// channel, a tuple per pixel). interleave: dst[k * planes + c] = row c's element k, the rows at
// src; deinterleave: the reverse, the rows at dst. Streaming stores when `stream` (the caller
// fences). False when not vectorized.
bool interleave_planes(size_t elem_size, int planes, void* dst, const void* src, int64_t stride,
                       int64_t n, bool stream);
bool deinterleave_planes(size_t elem_size, int planes, void* dst, int64_t stride, const void* src,
                         int64_t n, bool stream);
// `rows` rows of deinterleave_planes: row r from src + r * src_row_stride into the planes at
// dst + r * dst_row_stride. When dst_row_stride is n elements (each plane's rows one run),
// streaming goes by whole plane runs, however short the rows.
bool deinterleave_plane_rows(size_t elem_size, int planes, void* dst, int64_t stride,
                             int64_t dst_row_stride, const void* src, int64_t src_row_stride,
                             int64_t n, int64_t rows, bool stream);

// --- Transposes ------------------------------------------------------------------------------
// A rectangle of `rows` x `cols` elements: element (i, j) is read at src + i * src_row_stride +
// j * src_elem and written at dst + j * dst_row_stride + i * dst_elem. So src is contiguous
// along j, dst along i.
enum class TransposeOp : int8_t {
  kNone = -1,
  kCopy1,  // same dtype, by element size
  kCopy2,
  kCopy4,
  kCopy8,
  kF32ToBF16,
  kF32ToF16,
  kBF16ToF32,
  kF16ToF32,
  kCopy16,  // 16-byte elements (complex128): tiles only where a vector holds two or more
};

// The fused op for a dtype pair (kNone: transpose src elements, then convert).
TransposeOp transpose_op(ScalarType dst_t, ScalarType src_t);
// The op moving elements of `size` bytes unchanged (1, 2, 4, 8 or 16; kNone otherwise).
TransposeOp transpose_copy_op(size_t elem_size);

struct TransposeRect {
  const char* src = nullptr;
  char* dst = nullptr;
  int64_t rows = 0;  // along i, a multiple of the tile size
  int64_t cols = 0;  // along j, a multiple of the tile size
  int64_t src_row_stride = 0;
  int64_t dst_row_stride = 0;
  TransposeOp op = TransposeOp::kNone;
  // Non-temporal stores of whole 64-byte lines. By strips (panel false): runs of whole lines per
  // dst row, for the rows and columns covered by whole streaming steps (transpose_stream_rows x
  // transpose_stream_cols), the rest with ordinary stores; the caller guarantees dst is 64-byte
  // aligned and dst_row_stride a multiple of 64. By panels (panel true): any dst; each dst row's
  // first and last partial line, and the rows past the last whole panel step, get ordinary
  // stores (Note [transpose panels] in copy_tuning.h).
  bool stream = false;
  // Streaming: prefetch the next strip's src rows (the next rows along i) while reading this
  // one, worth it when src rows are short: the prefetchers do not follow a strip's column-wise
  // walk through them. May touch addresses past the rectangle (prefetches never fault). Such
  // strips are also taller (up to 128 rows, 512-byte dst runs): they read one compact region.
  bool prefetch_next_strip = false;
  // Streaming: by panels rather than strips (see `stream`).
  bool panel = false;
  // Streaming by strips: a stretch of another strip's src rows (`ahead_rows` rows from
  // `ahead`, `ahead_row_stride` apart, `ahead_row_bytes` each) to ask for in address order while
  // this rect runs: bytes [ahead_begin, ahead_end) of the rows laid end to end (Note [transpose
  // read-ahead] in copy_tuning.h). Prefetches never fault; nullptr: none.
  const char* ahead = nullptr;
  int64_t ahead_row_stride = 0;
  int64_t ahead_row_bytes = 0;
  int64_t ahead_begin = 0;
  int64_t ahead_end = 0;
  // The rect `repeat` times, src and dst advanced by src_repeat_stride and dst_repeat_stride
  // bytes each time: a small transpose's fastest outer dim, so that one call covers many rects.
  int64_t repeat = 1;
  int64_t src_repeat_stride = 0;
  int64_t dst_repeat_stride = 0;
  // Half tiles (transpose_half_tile; Note [half tiles] in copy_planner.cc): rows and cols are
  // multiples of the half edge, stores are ordinary (stream, panel and the read-ahead unused).
  bool half = false;
};

// The register tile edge (in elements) of `op` on the current SIMD target; 0 if not vectorized.
int transpose_tile(TransposeOp op);
// The edge of `op`'s half tiles on the current SIMD target (half transpose_tile's, in vectors of
// half the width): copies of 1 to 8 bytes whose half edge is at least 2, and the float32 <->
// bfloat16/half conversions whose half edge is at least 4; else 0.
int transpose_half_tile(TransposeOp op);
// The rows (along i) and columns (along j) of one streaming step: tiles grouped so that each dst
// row gets a run of whole 64-byte lines (128 bytes or more) and each src row whole lines. 0 if
// not vectorized.
int transpose_stream_rows(TransposeOp op);
int transpose_stream_cols(TransposeOp op);
// Transposes the rectangle tile by tile (rows and cols multiples of transpose_tile(op), or of
// transpose_half_tile(op) with rect.half).
void transpose_tiles(const TransposeRect& rect);
// Whether transpose_tiles converts `op`'s elements with the CPU's own bfloat16 instruction on
// the current target (simd.h, native_bf16); the stored bits are the same either way.
bool transpose_native_bf16(TransposeOp op);

// The SIMD target the kernels dispatch to now ("AVX3", "AVX2", "SSE4", "EMU128", ...), as named
// by the kernel variant that runs (hwy_dispatch.h).
const char* dispatch_target_name();

}  // namespace ferry::cpu::kernels
