// TensorImpl: the shared state behind Tensor handles — a Storage, sizes and strides (inline up
// to 6 dimensions), a storage offset, a dtype, the lazy conjugate and negative bits, and a slot
// for autograd's per-tensor state (which only ferry/autograd fills and reads).
// Invariants: sizes and strides have the same length; numel() is the product of sizes and
// numel() * itemsize() fits int64 (else construction raises ShapeError); is_contiguous() caches
// the row-major check and is refreshed by every metadata change.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "ferry/core/array_ref.h"
#include "ferry/core/intrusive_ptr.h"
#include "ferry/core/memory_format.h"
#include "ferry/core/scalar_type.h"
#include "ferry/core/small_vector.h"
#include "ferry/core/storage.h"

namespace ferry {

// What autograd keeps per tensor (gradient, grad_fn, ...). ferry/core only owns the slot; the
// concrete type is autograd::AutogradMeta.
class AutogradMetaInterface {
 public:
  virtual ~AutogradMetaInterface() = default;
  // Whether the tensor is the result of a recorded operation (has a grad_fn).
  virtual bool has_grad_fn() const = 0;
};

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
  // Note [requires_grad bit]: true for a leaf that requires grad and for every result of a
  // recorded operation (one with a grad_fn). The dispatcher reads only this bit to add the
  // autograd key, so autograd keeps it in step with its metadata.
  // A view (view_base) also requires grad when its base does, as in PyTorch.
  bool requires_grad() const {
    return requires_grad_ || (view_base_ && view_base_->requires_grad_);
  }
  // Only the bit set on this impl (a leaf's flag, or a recorded result's).
  bool requires_grad_bit() const { return requires_grad_; }
  bool is_contiguous() const { return is_contiguous_; }
  uint32_t version() const { return storage_.defined() ? storage_.version() : 0; }
  void bump_version() const {
    if (storage_.defined()) storage_.bump_version();
  }

  // Note [In-place on views] (ferry/autograd/variable.cc): the root base of a tensor made by a
  // view operation, null for others; and the storage version at which autograd last set the
  // view's history (mark_view sets it to the version at the view's making).
  TensorImpl* view_base() const { return view_base_.get(); }
  uint32_t view_version() const { return view_version_.load(std::memory_order_relaxed); }
  void set_view_version(uint32_t v) const { view_version_.store(v, std::memory_order_relaxed); }
  // Makes this impl a view of `of` (of's own base when `of` is a view).
  void mark_view(const TensorImpl& of);

  AutogradMetaInterface* autograd_meta() const { return autograd_meta_.get(); }
  void set_autograd_meta(std::unique_ptr<AutogradMetaInterface> meta) {
    autograd_meta_ = std::move(meta);
  }

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
  // Takes `other`'s storage and every field that describes the elements (sizes, strides,
  // offset, dtype, device, lazy bits), keeping this impl's identity and autograd state: what
  // Tensor::set_data does, so that a module's parameter stays the same object when it moves.
  void shallow_copy_from(const TensorImpl& other);
  // Replaces the storage (same dtype and layout; the device follows the storage, as in the
  // constructor). Raises ShapeError, changing nothing, when the storage is smaller than the
  // bytes the sizes, strides and offset reach.
  void set_storage(Storage storage);

 protected:
  void release_resources() override;

 private:
  // numel: the element count of sizes_, checked by the caller before it changed anything.
  void refresh_derived(int64_t numel);

  Storage storage_;
  std::unique_ptr<AutogradMetaInterface> autograd_meta_;
  IntrusivePtr<TensorImpl> view_base_;
  mutable std::atomic<uint32_t> view_version_{0};
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
