// plan_copy: picks the kernel, the transpose blocking and the thread count for a coalesced
// CopyProblem, from its strides and dst's alignment. Cheap enough for every copy_ (about 5 ns):
// no allocation, no loop longer than the rank, the SIMD target's name cached.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "ferry/backends/cpu/copy_kernels.h"
#include "ferry/backends/cpu/copy_plan.h"
#include "ferry/backends/cpu/copy_tuning.h"
#include "ferry/iter/parallel.h"

namespace ferry::cpu {

const char* copy_kernel_name(CopyKernelKind kind) {
  switch (kind) {
    case CopyKernelKind::Memcpy:
      return "Memcpy";
    case CopyKernelKind::Convert:
      return "Convert";
    case CopyKernelKind::Broadcast:
      return "Broadcast";
    case CopyKernelKind::Transpose:
      return "Transpose";
    case CopyKernelKind::Gather:
      return "Gather";
    case CopyKernelKind::Strided:
      return "Strided";
  }
  return "?";
}

std::string CopyPlan::describe() const {
  char buf[256];
  int len = 0;
  if (kind == CopyKernelKind::Transpose) {
    const std::string half = half_tile > 0
                                 ? ", half tiles " + std::to_string(half_tile) + "x" +
                                       std::to_string(half_tile) +
                                       (route == TransposeRoute::kFused ? " at the edges" : "")
                                 : "";
    len = std::snprintf(
        buf, sizeof(buf),
        "Transpose (src fast dim %d, %s, block %lldx%lld, tile %lldx%lld%s%s%s%s), %d thread%s, "
        "%s stores, %s",
        src_fast_dim, transpose_route_name(route), static_cast<long long>(block_rows),
        static_cast<long long>(block_cols), static_cast<long long>(tile_rows),
        static_cast<long long>(tile_cols), half.c_str(),
        native_bf16 ? ", AVX512_BF16 conversion" : "", panel ? ", by panels" : "",
        staged ? ", staged in whole lines" : "", threads, threads == 1 ? "" : "s",
        stream ? "streaming" : "ordinary", simd_target);
  } else {
    len = std::snprintf(buf, sizeof(buf), "%s, %d thread%s, %s stores, %s", copy_kernel_name(kind),
                        threads, threads == 1 ? "" : "s", stream ? "streaming" : "ordinary",
                        simd_target);
  }
  return std::string(buf, static_cast<size_t>(std::max(len, 0)));
}

bool stream_allows(CopyKernelKind kind, TransposeRoute route, kernels::ConjNeg flags) {
  return !flags.any() ||
         (kind == CopyKernelKind::Transpose && route == TransposeRoute::kConvertFirst);
}

const char* transpose_route_name(TransposeRoute route) {
  switch (route) {
    case TransposeRoute::kFused:
      return "fused";
    case TransposeRoute::kConvertFirst:
      return "converted first";
    case TransposeRoute::kMoveFirst:
      return "converted after";
    case TransposeRoute::kStrided:
      return "strided";
  }
  return "?";
}

TransposeRoute transpose_route(const CopyProblem& p) {
  const kernels::ConjNeg flags = kernels::effective_conj_neg(p.dst_dtype, p.conj, p.neg);
  const kernels::TransposeOp fused = kernels::transpose_op(p.dst_dtype, p.src_dtype);
  if (fused != kernels::TransposeOp::kNone && !flags.any() && kernels::transpose_tile(fused) > 0) {
    return TransposeRoute::kFused;
  }
  const auto tiles_of = [](ScalarType t) {
    const kernels::TransposeOp op = kernels::transpose_copy_op(element_size(t));
    return op != kernels::TransposeOp::kNone && kernels::transpose_tile(op) > 0;
  };
  if (tiles_of(p.dst_dtype)) return TransposeRoute::kConvertFirst;
  if (tiles_of(p.src_dtype)) return TransposeRoute::kMoveFirst;
  return TransposeRoute::kStrided;
}

kernels::TransposeOp transpose_tile_op(const CopyProblem& p, TransposeRoute route) {
  switch (route) {
    case TransposeRoute::kFused:
      return kernels::transpose_op(p.dst_dtype, p.src_dtype);
    case TransposeRoute::kConvertFirst:
      return kernels::transpose_copy_op(element_size(p.dst_dtype));
    case TransposeRoute::kMoveFirst:
    case TransposeRoute::kStrided:
      return kernels::transpose_copy_op(element_size(p.src_dtype));
  }
  return kernels::TransposeOp::kNone;
}

bool dst_rows_on_lines(const CopyProblem& p) {
  if (reinterpret_cast<uintptr_t>(p.dst) % 64 != 0) return false;
  for (int d = 1; d < p.ndim(); ++d) {
    if (p.dst_strides[d] % 64 != 0) return false;
  }
  return true;
}

TransposeStaging transpose_staging(const CopyProblem& p, int k) {
  TransposeStaging s;
  const TransposeRoute route = transpose_route(p);
  const int64_t tile = kernels::transpose_tile(transpose_tile_op(p, route));
  const int64_t rows = p.sizes[0];
  const int64_t cols = p.sizes[k];
  if (route != TransposeRoute::kFused || tile == 0 || rows % tile != 0 || cols % tile != 0) {
    return s;
  }
  const auto dst_size = static_cast<int64_t>(element_size(p.dst_dtype));
  const auto src_size = static_cast<int64_t>(element_size(p.src_dtype));
  const int64_t dst_run = rows * dst_size;
  const int64_t src_run = cols * src_size;
  const int64_t block = rows * cols * std::max(dst_size, src_size);
  const int64_t span = tuning::l2_set_span();
  const bool aliased =
      std::abs(p.src_strides[0]) % span == 0 || std::abs(p.dst_strides[k]) % span == 0;
  if (!aliased || block > tuning::kStagedBlockBytes ||
      std::min(dst_run, src_run) >= tuning::kTransposeMinStreamRunBytes) {
    return s;
  }
  for (int d = 1; d < p.ndim(); ++d) {
    if (d == k) continue;
    if (s.row_dim < 0 && p.dst_strides[d] == dst_run) s.row_dim = d;
    if (s.col_dim < 0 && p.src_strides[d] == src_run) s.col_dim = d;
  }
  s.shared = s.row_dim >= 0 && s.row_dim == s.col_dim;
  // A chunk doubles while it divides its dim, its side's runs are short of the target and the
  // block fits; src's side first (long src runs keep more lines in flight than rows do).
  const auto grows = [&](int dim, int64_t n, int64_t run, int64_t target, int64_t grown) {
    return dim >= 0 && run * n < target && p.sizes[dim] % (2 * n) == 0 &&
           grown <= tuning::kStagedBlockBytes;
  };
  for (bool grew = true; grew;) {
    grew = false;
    if (s.shared) {
      if (grows(s.row_dim, s.row_n, std::min(dst_run, src_run), tuning::kStagedSrcRunBytes,
                2 * block * s.row_n)) {
        s.row_n = s.col_n = 2 * s.row_n;
        grew = true;
      }
      continue;
    }
    if (grows(s.col_dim, s.col_n, src_run, tuning::kStagedSrcRunBytes,
              2 * block * s.row_n * s.col_n)) {
      s.col_n *= 2;
      grew = true;
    }
    if (grows(s.row_dim, s.row_n, dst_run, tuning::kStagedDstRunBytes,
              2 * block * s.row_n * s.col_n)) {
      s.row_n *= 2;
      grew = true;
    }
  }
  return s;
}

// Note [half tiles]
// A transpose side that is not a whole number of tiles leaves its last rows or columns to the
// edge loop (Transpose::block in copy_run.cc). Columns right of the tiles cost little there:
// each is a run along dst's contiguous dim. Rows below them cost a call per column for a run
// of a few elements, and a block under a whole tile on both sides is all edge: with sides of 8
// and the tiles of 16 of AVX-512 (and the byte tiles of every x86 target), permute(3, 0, 5, 1,
// 4, 2) of 16 x 16 x 8 x 16 x 16 x 8 float32 took 6.8 ms at one thread, where the AVX2
// target's 8 x 8 tiles took 1.6 and PyTorch 3.3 (AMD EPYC, Zen 5); converting to bfloat16 on the
// way, 13.9 ms. Copies, and the float32 <-> bfloat16/half conversions the tiles fuse, have tiles
// of half the edge in vectors of half the width (transpose_half_tile): they take the rows the
// whole tiles leave, over the whole tiles' columns, or the whole block when its columns are
// under a whole tile, with ordinary stores. They stay for those parts only: in a 4096 x 24
// transpose of bytes (24 columns) they took 0.079 ms against the edge loop's 0.022 for the
// columns, and half tiles of bytes for a whole 504 x 504 block 0.017 ms against 0.014.
// The conversions that go through a buffer (int32 -> float32 converted first, into the buffer,
// then moved by the tiles of float32) use half tiles for the whole buffer when they stream
// nothing, and repeated small blocks whose src rows continue one another are converted a whole
// row of all of them per call (Transpose::block): int32 -> float32 there went from 13.7-21.2 ms
// (the edge loop) through 8.4-8.5 (half tiles, a conversion call per row of 8) to 3.1 ms at
// one thread, against PyTorch's 5.8.
int64_t transpose_half_tile_for(const CopyProblem& p, int k) {
  const TransposeRoute route = transpose_route(p);
  if (route == TransposeRoute::kStrided) return 0;
  const kernels::TransposeOp op = transpose_tile_op(p, route);
  const int64_t tile = kernels::transpose_tile(op);
  const int64_t half = kernels::transpose_half_tile(op);
  const int64_t rows = p.sizes[0], cols = p.sizes[k];
  if (half == 0 || cols < half) return 0;
  return rows % tile >= half || cols < tile ? half : 0;
}

CopyPlan plan_copy(const CopyProblem& p) {
  CopyPlan plan;
  plan.simd_target = kernels::dispatch_target_name();
  const int64_t numel = p.numel();
  const auto dst_size = static_cast<int64_t>(element_size(p.dst_dtype));
  const auto src_size = static_cast<int64_t>(element_size(p.src_dtype));
  const kernels::ConjNeg flags = kernels::effective_conj_neg(p.dst_dtype, p.conj, p.neg);
  const bool same = p.dst_dtype == p.src_dtype && !flags.any();
  const CopyKernelKind dense_kind = same ? CopyKernelKind::Memcpy : CopyKernelKind::Convert;
  if (numel <= 1 || p.ndim() == 0) {
    plan.kind = dense_kind;
    return plan;
  }
  const int64_t dst0 = p.dst_strides[0];
  const int64_t src0 = p.src_strides[0];
  if (dst0 == dst_size) {
    if (src0 == src_size) {
      plan.kind = dense_kind;
    } else if (src0 == 0) {
      plan.kind = CopyKernelKind::Broadcast;
    } else {
      plan.kind = CopyKernelKind::Gather;
      // A dim along which src is contiguous, long enough on both sides for tiles, makes a
      // transpose; short ones are better served as gathers along dim 0.
      for (int d = 1; d < p.ndim(); ++d) {
        if (p.src_strides[d] == src_size && p.sizes[d] >= tuning::kMinTransposeSide &&
            p.sizes[0] >= tuning::kMinTransposeSide) {
          plan.kind = CopyKernelKind::Transpose;
          plan.src_fast_dim = d;
          break;
        }
      }
    }
  } else {
    plan.kind = src0 == 0 ? CopyKernelKind::Broadcast : CopyKernelKind::Strided;
  }

  if (plan.kind == CopyKernelKind::Transpose) {
    plan.route = transpose_route(p);
    const kernels::TransposeOp op = transpose_tile_op(p, plan.route);
    const bool direct = tiles_store_to_dst(plan.route);
    const int64_t tile = kernels::transpose_tile(op);
    plan.tile_rows = plan.tile_cols = tile;
    plan.native_bf16 = kernels::transpose_native_bf16(op);
    plan.half_tile = transpose_half_tile_for(p, plan.src_fast_dim);
    // Rows: one streaming step when the tiles store to dst (a run of whole dst lines per dst
    // row), else whole dst lines per strip, in whole tiles. Columns: a fixed width, or what the
    // buffer holds when the conversion goes through it.
    const int64_t step = std::max<int64_t>(tile, 1);
    const int64_t line_rows =
        std::max<int64_t>(direct ? kernels::transpose_stream_rows(op) : 0, 64 / dst_size);
    plan.block_rows = (std::max(step, line_rows) + step - 1) / step * step;
    if (plan.route == TransposeRoute::kFused) {
      plan.block_cols = tuning::kTransposeCols;
      // Few columns (NHWC -> NCHW: 64 channels): taller blocks, fewer calls per byte.
      const int64_t cols = p.sizes[plan.src_fast_dim];
      if (cols < plan.block_cols) {
        const int64_t width = (cols + step - 1) / step * step;
        plan.block_rows *=
            std::clamp<int64_t>(plan.block_cols / width, 1, tuning::kTransposeMaxRowScale);
        plan.block_cols = width;
      }
    } else {
      // The buffer holds a block in dst's dtype (converted first) or in src's (moved first).
      const int64_t held =
          plan.route == TransposeRoute::kConvertFirst ? dst_size : std::max(dst_size, src_size);
      const int64_t fit = tuning::kTransposeBufferBytes / (plan.block_rows * held);
      plan.block_cols = std::max<int64_t>(step, fit / step * step);
    }
  }

  // Threads: enough bytes for each to amortize waking it; at most region_threads() (1 inside a
  // parallel region, a ThreadCapGuard's cap under one).
  const int64_t traffic =
      numel * (dst_size + (plan.kind == CopyKernelKind::Broadcast ? 0 : src_size));
  if (traffic >= 2 * tuning::kMinBytesPerThread) {
    plan.threads =
        static_cast<int>(std::min<int64_t>(region_threads(), traffic / tuning::kMinBytesPerThread));
  }
  // Store mode: streaming stores for a contiguous output once each thread's part of it is past
  // the threshold of the way the kernel writes (copy_tuning.h). conj/neg are applied in place
  // after the conversion, so they need the output cached, except in a transpose that converts
  // first: there they are applied in its buffer.
  const int64_t out_bytes = numel * dst_size;
  if (out_bytes >= tuning::kStreamMinBytes && dst0 == dst_size &&
      stream_allows(plan.kind, plan.route, flags)) {
    const tuning::StreamThresholds& limits = tuning::stream_thresholds();
    const int64_t threshold =
        plan.kind == CopyKernelKind::Transpose ? limits.scattered : limits.sequential;
    plan.stream = out_bytes / plan.threads >= threshold;
  }
  // Narrow transposes whose rows share the L2's sets go through buffers and store whole lines
  // (Note [line-staged transposes] in copy_run.cc): the two rules below do not apply to them.
  if (plan.kind == CopyKernelKind::Transpose) {
    plan.staged = transpose_staging(p, plan.src_fast_dim).active();
  }
  // A transpose writes each dst row at most dim 0's elements per block (the outer dims step to
  // other rows). Below two lines of them (a 6-dim permutation whose dim 0 has 16 float32; 5- and
  // 6-dim permutations of bytes and bfloat16) the strips have too few rows for a streaming step
  // and the panels store single lines or less, scattered over rows a power of two apart, which
  // costs more than reading dst first: ordinary stores, as `ferry explain` then says. Streaming,
  // permute6d_305142_f32 took 3.0-3.1 ms at 2 threads against 2.7-2.8 (Intel Xeon); its uint8
  // twin 7.5 ms against 1.7-1.8 ms at 1 thread, and permute(4, 3, 2, 1, 0) of 32 x 16 x 16 x 32
  // x 32 bytes 11.7-12.2 ms against 5.1-5.8 ms (AMD EPYC, Zen 4).
  if (plan.kind == CopyKernelKind::Transpose && plan.stream && !plan.staged &&
      p.sizes[0] * dst_size < tuning::kTransposeMinStreamRunBytes) {
    plan.stream = false;
  }
  // Streaming tiles need dst rows that start on a line (every block's rows then do); others
  // stream by panels, each down a tall block (Note [transpose panels] in copy_tuning.h).
  if (plan.kind == CopyKernelKind::Transpose && plan.stream && !plan.staged &&
      plan.route == TransposeRoute::kFused && !dst_rows_on_lines(p)) {
    plan.panel = true;
    plan.block_rows = tuning::kTransposePanelRows;
    plan.block_cols = tuning::kTransposeCols;
  }
  // Half tiles go through a conversion's buffer only with ordinary stores (Note [half tiles]).
  if (plan.kind == CopyKernelKind::Transpose && plan.route != TransposeRoute::kFused &&
      plan.stream) {
    plan.half_tile = 0;
  }
  return plan;
}

}  // namespace ferry::cpu
