// TensorImpl metadata and the layout predicates (contiguity, density, channels-last).
#include "ferry/core/tensor_impl.h"

#include <algorithm>
#include <array>
#include <numeric>

namespace ferry {

TensorImpl::TensorImpl(Storage storage, ScalarType dtype, IntArrayRef sizes, IntArrayRef strides,
                       int64_t storage_offset)
    : storage_(std::move(storage)),
      sizes_(sizes),
      strides_(strides),
      storage_offset_(storage_offset),
      itemsize_(element_size(dtype)),
      device_(storage_.defined() ? storage_.device() : Device(DeviceType::CPU)),
      dtype_(dtype) {
  refresh_derived();
}

void TensorImpl::set_sizes_and_strides(IntArrayRef sizes, IntArrayRef strides) {
  sizes_ = DimVector(sizes);
  strides_ = DimVector(strides);
  refresh_derived();
}

void TensorImpl::refresh_derived() {
  numel_ = 1;
  for (int64_t s : sizes_) numel_ *= s;
  is_contiguous_ = compute_contiguous(sizes_, strides_);
}

bool compute_contiguous(IntArrayRef sizes, IntArrayRef strides) {
  // An empty tensor is contiguous whatever its strides.
  if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) return true;
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

namespace {

// Channels, then the spatial dims from innermost out, then the batch.
constexpr std::array<int, 4> kChannelsLast2dOrder{1, 3, 2, 0};
constexpr std::array<int, 5> kChannelsLast3dOrder{1, 4, 3, 2, 0};

template <size_t N>
bool channels_last_contiguous(IntArrayRef sizes, IntArrayRef strides,
                              const std::array<int, N>& order) {
  int64_t expected = 1;
  for (int d : order) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

template <size_t N>
bool channels_last_like(IntArrayRef sizes, IntArrayRef strides, const std::array<int, N>& order) {
  // A zero channel stride (broadcast channels) gives no evidence: stay with contiguous.
  if (strides[1] == 0) return false;
  int64_t min = 0;
  for (int d : order) {
    if (sizes[d] == 0 || strides[d] < min) return false;
    // Batch stride equal to the channel stride: ambiguous (e.g. N111), call it contiguous.
    if (d == 0 && min == strides[1]) return false;
    min = strides[d];
    if (sizes[d] > 1) min *= sizes[d];
  }
  return true;
}

}  // namespace

bool compute_channels_last_contiguous(IntArrayRef sizes, IntArrayRef strides, int rank) {
  if (static_cast<int>(sizes.size()) != rank) return false;
  return rank == 4   ? channels_last_contiguous(sizes, strides, kChannelsLast2dOrder)
         : rank == 5 ? channels_last_contiguous(sizes, strides, kChannelsLast3dOrder)
                     : false;
}

bool strides_like_channels_last(IntArrayRef sizes, IntArrayRef strides, int rank) {
  if (static_cast<int>(sizes.size()) != rank) return false;
  return rank == 4   ? channels_last_like(sizes, strides, kChannelsLast2dOrder)
         : rank == 5 ? channels_last_like(sizes, strides, kChannelsLast3dOrder)
                     : false;
}

bool compute_non_overlapping_and_dense(IntArrayRef sizes, IntArrayRef strides) {
  const size_t rank = sizes.size();
  if (rank == 1) return sizes[0] < 2 || strides[0] == 1;
  DimVector order(rank);
  std::iota(order.begin(), order.end(), 0);
  // Size-0/1 dimensions go last: their strides do not matter.
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    if (sizes[a] < 2 || sizes[b] < 2) return sizes[a] >= 2 && sizes[b] < 2;
    return strides[a] < strides[b];
  });
  int64_t expected = 1;
  for (int64_t d : order) {
    if (sizes[d] < 2) return true;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

}  // namespace ferry
