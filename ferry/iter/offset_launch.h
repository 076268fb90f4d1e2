// How a device kernel built on OffsetCalculator launches one strided copy: the host-side
// decisions of the CUDA launcher, in plain C++ so that they are unit-tested without a GPU. A copy
// with more than kMaxOffsetDims dimensions is split over its outermost ones into launches of
// kMaxOffsetDims; each launch takes 32-bit indices exactly when they cannot wrap.
// Invariant: the launches cover every element of the copy exactly once, each at the byte offsets
// the whole copy gives it.
#pragma once

#include <cstdint>
#include <limits>

#include "ferry/core/error.h"
#include "ferry/iter/offset_calculator.h"

namespace ferry {

// One kernel launch: dims [0, ndim) of the copy's sizes and byte strides, starting `offset`
// bytes into each operand.
template <int NArgs>
struct OffsetLaunch {
  int ndim = 0;
  int64_t numel = 0;
  int64_t offset[NArgs] = {};
  bool index32 = false;  // OffsetCalculator<NArgs, uint32_t>; uint64_t otherwise
};

// Whether a launch over dims [0, ndim) may index with uint32_t: every operand's largest byte
// offset fits 32 bits (so the offset sums cannot wrap), and so does the element count with 2^31
// to spare, so that a grid-stride loop's last step (i + threads * blocks, far below 2^31) cannot
// wrap either. sizes[d] >= 1 and byte strides >= 0.
template <int NArgs>
bool fits_32bit_indexing(int ndim, const int64_t* sizes, const int64_t* const* byte_strides) {
  constexpr int64_t kMaxOffset = std::numeric_limits<uint32_t>::max();
  int64_t numel = 1;
  for (int d = 0; d < ndim; ++d) {
    numel *= sizes[d];
    if (numel > std::numeric_limits<int32_t>::max()) return false;
  }
  for (int arg = 0; arg < NArgs; ++arg) {
    int64_t last = 0;  // the offset of the last element
    for (int d = 0; d < ndim; ++d) {
      if (sizes[d] > 1 && byte_strides[arg][d] > (kMaxOffset - last) / (sizes[d] - 1)) {
        return false;
      }
      last += (sizes[d] - 1) * byte_strides[arg][d];
    }
  }
  return true;
}

namespace detail {

template <int NArgs, typename Launch>
void split_offset_launches(int ndim, const int64_t* sizes, const int64_t* const* byte_strides,
                           const int64_t* offset, Launch& launch) {
  if (ndim > kMaxOffsetDims) {
    const int outer = ndim - 1;
    int64_t at[NArgs];
    for (int64_t i = 0; i < sizes[outer]; ++i) {
      for (int arg = 0; arg < NArgs; ++arg) at[arg] = offset[arg] + i * byte_strides[arg][outer];
      split_offset_launches<NArgs>(outer, sizes, byte_strides, at, launch);
    }
    return;
  }
  OffsetLaunch<NArgs> l;
  l.ndim = ndim;
  l.numel = 1;
  for (int d = 0; d < ndim; ++d) l.numel *= sizes[d];
  for (int arg = 0; arg < NArgs; ++arg) l.offset[arg] = offset[arg];
  l.index32 = fits_32bit_indexing<NArgs>(ndim, sizes, byte_strides);
  launch(static_cast<const OffsetLaunch<NArgs>&>(l));
}

}  // namespace detail

// Calls launch(const OffsetLaunch<NArgs>&) once per kernel launch the copy needs, outermost
// index slowest; none when the copy has no elements. sizes[d] >= 0 and byte_strides[arg][d] >= 0
// (what OffsetCalculator takes); anything else raises Error before any launch.
template <int NArgs, typename Launch>
void for_each_offset_launch(int ndim, const int64_t* sizes, const int64_t* const* byte_strides,
                            Launch&& launch) {
  FERRY_CHECK(ndim >= 0, "offset launch: expected a rank >= 0, but got ", ndim);
  bool empty = false;
  for (int d = 0; d < ndim; ++d) {
    FERRY_CHECK(sizes[d] >= 0, "offset launch: expected sizes >= 0, but dimension ", d, " has ",
                sizes[d]);
    empty = empty || sizes[d] == 0;
    for (int arg = 0; arg < NArgs; ++arg) {
      FERRY_CHECK(byte_strides[arg][d] >= 0,
                  "offset launch: expected byte strides >= 0, but operand ", arg, " has ",
                  byte_strides[arg][d], " in dimension ", d);
    }
  }
  if (empty) return;
  const int64_t origin[NArgs] = {};
  detail::split_offset_launches<NArgs>(ndim, sizes, byte_strides, origin, launch);
}

}  // namespace ferry
