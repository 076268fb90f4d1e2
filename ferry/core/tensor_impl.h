// TensorImpl: the shared state behind Tensor handles — a Storage, sizes and strides (inline up
// to 6 dimensions), a storage offset, a dtype, and the lazy conjugate and negative bits.
// Invariants: sizes and strides have the same length; numel() is the product of sizes and
// numel() * itemsize() fits int64 (else construction raises ShapeError); is_contiguous() caches
// the row-major check and is refreshed by every metadata change.
#pragma once

#include <cstdint>

#include "ferry/core/array_ref.h"
#include "ferry/core/intrusive_ptr.h"
#include "ferry/core/memory_format.h"
#include "ferry/core/scalar_type.h"
#include "ferry/core/small_vector.h"
#include "ferry/core/storage.h"

namespace ferry {

class TensorImpl : public RefCounted {
 public:
  TensorImpl(Storage storage, ScalarType dtype, IntArrayRef sizes, IntArrayRef strides,
             int64_t storage_offset);

  const Storage& storage() const { return storage_; }
  IntArrayRef sizes() const { return sizes_; }
  IntArrayRef strides() const { return strides_; }
  int64_t dim() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t numel() const { return numel_; }
  int64_t storage_offset() const { return storage_offset_; }
  ScalarType dtype() const { return dtype_; }
  Device device() const { return device_; }
  size_t itemsize() const { return itemsize_; }
  bool is_conj() const { return is_conj_; }
  bool is_neg() const { return is_neg_; }
  bool requires_grad() const { return requires_grad_; }
  bool is_contiguous() const { return is_contiguous_; }

  // Address of element [0, ..., 0]. Null when the storage is.
  void* data() const {
    return static_cast<char*>(storage_.data()) + storage_offset_ * static_cast<int64_t>(itemsize_);
  }

  // Replaces the metadata; does not check bounds against the storage (callers do). Raises
  // ShapeError, leaving numel() unchanged, when the new element count overflows.
  void set_sizes_and_strides(IntArrayRef sizes, IntArrayRef strides);
  void set_storage_offset(int64_t offset) { storage_offset_ = offset; }
  void set_conj(bool v) { is_conj_ = v; }
  void set_neg(bool v) { is_neg_ = v; }
  void set_requires_grad(bool v) { requires_grad_ = v; }

 private:
  // numel: the element count of sizes_, checked by the caller before it changed anything.
  void refresh_derived(int64_t numel);

  Storage storage_;
  DimVector sizes_;
  DimVector strides_;
  int64_t storage_offset_ = 0;
  int64_t numel_ = 1;
  size_t itemsize_;
  Device device_;
  ScalarType dtype_;
  bool is_conj_ = false;
  bool is_neg_ = false;
  bool requires_grad_ = false;
  bool is_contiguous_ = true;
};

// Layout predicates on raw sizes and strides, shared by tensors and the iterator.
bool compute_contiguous(IntArrayRef sizes, IntArrayRef strides);
bool compute_channels_last_contiguous(IntArrayRef sizes, IntArrayRef strides, int rank);
bool compute_non_overlapping_and_dense(IntArrayRef sizes, IntArrayRef strides);
// Whether strides order the dimensions as channels-last would (PyTorch's heuristic, which
// falls back to contiguous for ambiguous cases such as size-1 channels).
bool strides_like_channels_last(IntArrayRef sizes, IntArrayRef strides, int rank);

}  // namespace ferry
