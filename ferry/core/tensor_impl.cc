// TensorImpl metadata and the layout predicates (contiguity, density, channels-last).
#include "ferry/core/tensor_impl.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>

#include "ferry/core/error.h"
#include "ferry/core/size_math.h"

namespace ferry {

namespace {

// The element count of `sizes`, raising ShapeError unless numel * itemsize fits int64: then
// nbytes() and a dense copy's allocation never wrap (an expanded view reaches far fewer bytes
// than it has elements, but may be cloned).
int64_t checked_dense_numel(IntArrayRef sizes, size_t itemsize) {
  const int64_t numel = checked_numel(sizes);
  int64_t nbytes = 0;
  const bool fits = mul_fits(numel, static_cast<int64_t>(itemsize), &nbytes);
  FERRY_CHECK_AS(ShapeError, fits,
                 "storage size calculation overflowed: expected sizes whose dense byte size fits "
                 "int64, but sizes ",
                 sizes, " hold ", numel, " elements of ", itemsize, " bytes");
  return numel;
}

}  // namespace

TensorImpl::TensorImpl(Storage storage, ScalarType dtype, IntArrayRef sizes, IntArrayRef strides,
                       int64_t storage_offset)
    : storage_(std::move(storage)),
      sizes_(sizes),
      strides_(strides),
      storage_offset_(storage_offset),
      itemsize_(element_size(dtype)),
      // Tensors on the CPU report plain "cpu", whatever index their memory was named with.
      device_(storage_.defined() && !storage_.device().is_cpu() ? storage_.device()
                                                                : Device(DeviceType::CPU)),
      dtype_(dtype) {
  refresh_derived(checked_dense_numel(sizes_, itemsize_));
}

void TensorImpl::set_sizes_and_strides(IntArrayRef sizes, IntArrayRef strides) {
  const int64_t numel = checked_dense_numel(sizes, itemsize_);  // before anything changes
  sizes_ = DimVector(sizes);
  strides_ = DimVector(strides);
  refresh_derived(numel);
}

void TensorImpl::shallow_copy_from(const TensorImpl& other) {
  if (&other == this) return;
  storage_ = other.storage_;
  sizes_ = other.sizes_;
  strides_ = other.strides_;
  storage_offset_ = other.storage_offset_;
  itemsize_ = other.itemsize_;
  device_ = other.device_;
  dtype_ = other.dtype_;
  is_conj_ = other.is_conj_;
  is_neg_ = other.is_neg_;
  refresh_derived(other.numel_);
}

void TensorImpl::set_storage(Storage storage) {
  const int64_t needed =
      checked_storage_nbytes(sizes_, strides_, storage_offset_, itemsize_, "set_storage");
  const auto has = storage.defined() ? static_cast<int64_t>(storage.nbytes()) : 0;
  FERRY_CHECK_AS(ShapeError, has >= needed, "set_storage: expected a storage of at least ", needed,
                 " bytes for sizes ", IntArrayRef(sizes_), ", strides ", IntArrayRef(strides_),
                 " and offset ", storage_offset_, ", but got ", has, " bytes");
  device_ =
      storage.defined() && !storage.device().is_cpu() ? storage.device() : Device(DeviceType::CPU);
  storage_ = std::move(storage);
}

void TensorImpl::mark_view(const TensorImpl& of) {
  if (&of == this) return;
  const TensorImpl* root = of.view_base_ ? of.view_base_.get() : &of;
  view_base_ = IntrusivePtr<TensorImpl>(const_cast<TensorImpl*>(root));
  set_view_version(version());
}

void TensorImpl::release_resources() {
  autograd_meta_.reset();
  view_base_.reset();
  storage_ = Storage();
}

void TensorImpl::refresh_derived(int64_t numel) {
  numel_ = numel;
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
  bool overflowed = false;  // then no later stride can be `expected`
  for (int d : order) {
    if (sizes[d] == 1) continue;
    if (overflowed || strides[d] != expected) return false;
    overflowed = !mul_fits(expected, sizes[d], &expected);
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
    // Saturates: no later stride can reach past int64 anyway.
    if (sizes[d] > 1 && !mul_fits(min, sizes[d], &min)) min = INT64_MAX;
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
  bool overflowed = false;  // then no later stride can be `expected`
  for (int64_t d : order) {
    if (sizes[d] < 2) return true;
    if (overflowed || strides[d] != expected) return false;
    overflowed = !mul_fits(expected, sizes[d], &expected);
  }
  return true;
}

}  // namespace ferry
