// The host-side plan of the CUDA reduction kernel and the combine rules it runs, in plain C++ so
// that both are unit-tested without a GPU: the walk (kept dims become outputs, reduced dims the
// inner index, each coalesced and ordered fastest first), the launch (which thread reduces which
// elements of which output), and the associative combines whose results equal the CPU kernel's
// sequential rules in any grouping: NaN wins amax; argmax takes the first maximum, and the first
// NaN as the maximum. Accumulators are the CPU's: double for floating inputs, int64 otherwise.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <type_traits>
#include <vector>

#include "ferry/core/bfloat16.h"
#include "ferry/core/error.h"
#include "ferry/core/float_bits.h"
#include "ferry/core/half.h"
#include "ferry/iter/offset_calculator.h"

namespace ferry::cuda {

template <typename T>
using reduce_acc_t = std::conditional_t<std::is_floating_point_v<T> || std::is_same_v<T, Half> ||
                                            std::is_same_v<T, BFloat16>,
                                        double, int64_t>;

template <typename Acc>
FERRY_HOST_DEVICE inline bool acc_is_nan(Acc v) {
  if constexpr (std::is_floating_point_v<Acc>) {
    return v != v;
  } else {
    return false;
  }
}

template <typename Acc>
struct ReduceSum {
  using Value = Acc;
  FERRY_HOST_DEVICE static Value identity() { return Acc(0); }
  FERRY_HOST_DEVICE static Value lift(Acc v, int64_t /*index*/) { return v; }
  FERRY_HOST_DEVICE static Value combine(Value a, Value b) { return a + b; }
};

template <typename Acc>
struct ReduceMax {
  using Value = Acc;
  FERRY_HOST_DEVICE static Value identity() {
    if constexpr (std::is_floating_point_v<Acc>) {
      return -std::numeric_limits<Acc>::infinity();
    } else {
      return std::numeric_limits<Acc>::lowest();
    }
  }
  FERRY_HOST_DEVICE static Value lift(Acc v, int64_t /*index*/) { return v; }
  FERRY_HOST_DEVICE static Value combine(Value a, Value b) {
    if (acc_is_nan(a)) return a;
    if (acc_is_nan(b)) return b;
    return b > a ? b : a;
  }
};

template <typename Acc>
struct ArgmaxValue {
  Acc value;
  int64_t index;
};

template <typename Acc>
struct ReduceArgmax {
  using Value = ArgmaxValue<Acc>;
  FERRY_HOST_DEVICE static Value identity() {
    return {ReduceMax<Acc>::identity(), std::numeric_limits<int64_t>::max()};
  }
  FERRY_HOST_DEVICE static Value lift(Acc v, int64_t index) { return {v, index}; }
  // The NaN with the smallest index, else the largest value with the smallest index.
  FERRY_HOST_DEVICE static Value combine(Value a, Value b) {
    const bool a_nan = acc_is_nan(a.value), b_nan = acc_is_nan(b.value);
    if (a_nan || b_nan) {
      if (a_nan && b_nan) return a.index <= b.index ? a : b;
      return a_nan ? a : b;
    }
    if (a.value > b.value) return a;
    if (b.value > a.value) return b;
    return a.index <= b.index ? a : b;
  }
};

// Merges adjacent dims (fastest first) that one stride per operand walks, and drops size-1
// dims. strides[arg][d] for NArgs operands. @post the element offsets of every linear index are
// unchanged.
template <int NArgs>
void coalesce_fastest_first(std::vector<int64_t>& sizes, std::vector<int64_t> (&strides)[NArgs]) {
  std::vector<int64_t> out_sizes;
  std::vector<int64_t> out_strides[NArgs];
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    bool merges = !out_sizes.empty();
    for (int a = 0; a < NArgs && merges; ++a) {
      merges = out_strides[a].back() * out_sizes.back() == strides[a][d];
    }
    if (merges) {
      out_sizes.back() *= sizes[d];
    } else {
      out_sizes.push_back(sizes[d]);
      for (int a = 0; a < NArgs; ++a) out_strides[a].push_back(strides[a][d]);
    }
  }
  sizes = std::move(out_sizes);
  for (int a = 0; a < NArgs; ++a) strides[a] = std::move(out_strides[a]);
}

// The element walk of one reduction, byte strides, fastest dim first.
struct ReduceGeometry {
  std::vector<int64_t> kept_sizes;
  std::vector<int64_t> kept_strides[2];  // input, output
  std::vector<int64_t> red_sizes;
  std::vector<int64_t> red_strides[1];  // input
  int64_t outputs = 1;
  int64_t reduced = 1;
  // Whether the reduced elements of one output lie closer together than neighbouring outputs
  // do: threads then split the reduced index (else the outputs) across a warp.
  bool reduce_fastest = true;
};

// sizes and strides (elements) of the input, the output's strides (input's rank, size 1 on the
// reduced dims), the reduced dims (sorted, unique). An empty reduction (reduced == 0) keeps no
// reduced dims. Raises NotImplementedError when either part
// keeps more than kMaxOffsetDims dims after coalescing.
inline ReduceGeometry plan_reduce_geometry(const std::vector<int64_t>& sizes,
                                           const std::vector<int64_t>& in_strides,
                                           const std::vector<int64_t>& out_strides,
                                           const std::vector<int64_t>& dims, int64_t in_elem,
                                           int64_t out_elem) {
  ReduceGeometry g;
  std::vector<bool> reduced(sizes.size(), false);
  for (int64_t d : dims) reduced[static_cast<size_t>(d)] = true;
  std::vector<size_t> kept_order, red_order;
  for (size_t d = 0; d < sizes.size(); ++d) (reduced[d] ? red_order : kept_order).push_back(d);
  // Outputs ordered by their own strides (writes coalesce), ties by the input's; the reduced
  // index by the input's strides. Argmax reduces one dim, so its index is the dim's own.
  std::stable_sort(kept_order.begin(), kept_order.end(), [&](size_t a, size_t b) {
    if (out_strides[a] != out_strides[b]) return out_strides[a] < out_strides[b];
    return in_strides[a] < in_strides[b];
  });
  std::stable_sort(red_order.begin(), red_order.end(),
                   [&](size_t a, size_t b) { return in_strides[a] < in_strides[b]; });
  for (size_t d : kept_order) {
    g.kept_sizes.push_back(sizes[d]);
    g.kept_strides[0].push_back(in_strides[d] * in_elem);
    g.kept_strides[1].push_back(out_strides[d] * out_elem);
    g.outputs *= sizes[d];
  }
  for (size_t d : red_order) {
    g.red_sizes.push_back(sizes[d]);
    g.red_strides[0].push_back(in_strides[d] * in_elem);
    g.reduced *= sizes[d];
  }
  coalesce_fastest_first<2>(g.kept_sizes, g.kept_strides);
  coalesce_fastest_first<1>(g.red_sizes, g.red_strides);
  if (g.reduced == 0) {
    // Nothing to walk (and no OffsetCalculator may divide by a zero size).
    g.red_sizes.clear();
    g.red_strides[0].clear();
  }
  FERRY_CHECK_AS(NotImplementedError,
                 static_cast<int>(g.kept_sizes.size()) <= kMaxOffsetDims &&
                     static_cast<int>(g.red_sizes.size()) <= kMaxOffsetDims,
                 "CUDA reduce: expected at most ", kMaxOffsetDims,
                 " kept and reduced dims after merging, but got ", g.kept_sizes.size(), " and ",
                 g.red_sizes.size());
  if (!g.kept_sizes.empty() && !g.red_sizes.empty()) {
    g.reduce_fastest = g.red_strides[0][0] <= g.kept_strides[0][0];
  }
  return g;
}

// How the reduction kernel's threads share the work. A block is `lanes_reduce` x `lanes_out`
// threads (the reduce lanes fastest when reduce_fastest, so a warp reads neighbouring elements);
// block b of grid row `split` serves outputs [b * lanes_out, (b + 1) * lanes_out) and reduced
// indices [split * per_split, (split + 1) * per_split). With splits > 1 each block leaves a
// partial value and a second kernel combines the splits.
struct ReduceLaunch {
  int lanes_reduce = 1;
  int lanes_out = 1;
  int64_t out_blocks = 1;  // blocks needed along the outputs (the grid may loop over them)
  int splits = 1;
  int64_t per_split = 0;
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline int pow2_at_most(int64_t v, int limit) {
  int p = 1;
  while (p < limit && p < v) p *= 2;
  return p;
}

// `threads` per block (a power of two), `target_blocks` to fill the device.
inline ReduceLaunch plan_reduce_launch(int64_t outputs, int64_t reduced, bool reduce_fastest,
                                       int threads, int64_t target_blocks) {
  ReduceLaunch l;
  if (reduce_fastest) {
    l.lanes_reduce = pow2_at_most(reduced, threads);
    l.lanes_out = threads / l.lanes_reduce;
  } else {
    l.lanes_out = pow2_at_most(outputs, 32);
    l.lanes_reduce = threads / l.lanes_out;
  }
  l.out_blocks = ceil_div(std::max<int64_t>(outputs, 1), l.lanes_out);
  // Split the reduced index over more blocks only while each thread keeps >= 16 elements.
  const int64_t by_work = ceil_div(reduced, int64_t{l.lanes_reduce} * 16);
  const int64_t by_device = target_blocks / l.out_blocks;
  l.splits = static_cast<int>(std::clamp<int64_t>(std::min(by_work, by_device), 1, 65535));
  l.per_split = ceil_div(reduced, l.splits);
  return l;
}

// The reduced indices thread (lane_out, lane_reduce) of block `out_block` in grid row `split`
// visits: output `output` (valid when < outputs), indices begin, begin + step, ... < end.
struct ReduceThreadWork {
  int64_t output;
  int64_t begin;
  int64_t end;
  int64_t step;
};
FERRY_HOST_DEVICE inline ReduceThreadWork reduce_thread_work(int lanes_reduce, int lanes_out,
                                                             int64_t per_split, int64_t reduced,
                                                             int64_t out_block, int split,
                                                             int lane_out, int lane_reduce) {
  ReduceThreadWork w;
  w.output = out_block * lanes_out + lane_out;
  const int64_t first = static_cast<int64_t>(split) * per_split;
  const int64_t last = first + per_split < reduced ? first + per_split : reduced;
  w.begin = first + lane_reduce;
  w.end = last;
  w.step = lanes_reduce;
  return w;
}

}  // namespace ferry::cuda
