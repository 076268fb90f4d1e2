// Storage: reference-counted bytes on one device, obtained from an Allocator.
// A DataPtr owns one allocation: a data pointer, a context handed to its deleter, and the
// device; Storage shares it between tensors (views). The bytes are freed when the last
// Storage handle goes away. A storage also carries the version counter that every view of it
// shares: each in-place write bumps it, and autograd compares it with the version a saved
// tensor had when it was saved. Allocators are looked up per device type, so the layers above
// (the caching device allocator, the pinned host allocator) can install their own.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "ferry/core/device.h"
#include "ferry/core/intrusive_ptr.h"

namespace ferry {

using DeleterFn = void (*)(void* context);

// Unique ownership of one allocation.
class DataPtr {
 public:
  DataPtr() = default;
  DataPtr(void* data, Device device) : data_(data), device_(device) {}  // not owning
  DataPtr(void* data, void* context, DeleterFn deleter, Device device)
      : data_(data), context_(context), deleter_(deleter), device_(device) {}
  DataPtr(const DataPtr&) = delete;
  DataPtr& operator=(const DataPtr&) = delete;
  DataPtr(DataPtr&& other) noexcept { *this = std::move(other); }
  DataPtr& operator=(DataPtr&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = std::exchange(other.data_, nullptr);
      context_ = std::exchange(other.context_, nullptr);
      deleter_ = std::exchange(other.deleter_, nullptr);
      device_ = other.device_;
    }
    return *this;
  }
  ~DataPtr() { reset(); }

  void* get() const { return data_; }
  void* context() const { return context_; }
  DeleterFn deleter() const { return deleter_; }
  Device device() const { return device_; }
  explicit operator bool() const { return data_ != nullptr; }

  void reset() {
    if (deleter_ != nullptr) deleter_(context_);
    data_ = context_ = nullptr;
    deleter_ = nullptr;
  }

 private:
  void* data_ = nullptr;
  void* context_ = nullptr;
  DeleterFn deleter_ = nullptr;
  Device device_;
};

// Hands out DataPtrs for one device type. Implementations must be thread-safe.
class Allocator {
 public:
  virtual ~Allocator() = default;
  // `device` carries the index for device types that have one.
  virtual DataPtr allocate(size_t nbytes, Device device) = 0;
};

// The allocator used for new tensors of `type`. CPU has a default; device types get theirs
// when their backend (or the memory layer) installs one. Raises DeviceError if none is set.
Allocator* get_allocator(DeviceType type);
// Installs `allocator` for `type` (nullptr removes it); returns the previous one.
Allocator* set_allocator(DeviceType type, Allocator* allocator);

// The allocator for page-locked host memory (`pinned_memory` in TensorOptions); installed by
// the memory layer. Raises DeviceError if none is set.
Allocator* get_pinned_host_allocator();
Allocator* set_pinned_host_allocator(Allocator* allocator);

// The default CPU allocator: 64-byte aligned; large blocks are 2 MiB aligned and advised as
// huge pages, which helps transposes that stride across many pages, and kept for reuse when
// freed (ferry/core/cpu_block_cache.h).
Allocator* cpu_allocator();
inline constexpr size_t kCpuAlignment = 64;

class StorageImpl : public RefCounted {
 public:
  StorageImpl(DataPtr data, size_t nbytes, Allocator* allocator)
      : data_(std::move(data)), nbytes_(nbytes), allocator_(allocator) {}

  void* data() const { return data_.get(); }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return data_.device(); }
  Allocator* allocator() const { return allocator_; }
  const DataPtr& data_ptr() const { return data_; }

  // Note [Version counter]: bumped by every operation that writes the bytes in place (copy_,
  // fill_, add_, ...), through any view; never by out-of-place operations.
  uint32_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  DataPtr data_;
  std::atomic<uint32_t> version_{0};
  size_t nbytes_;
  Allocator* allocator_;  // null for external memory (from_blob)
};

class Storage {
 public:
  Storage() = default;
  // Allocates `nbytes` with `allocator`.
  Storage(size_t nbytes, Allocator* allocator, Device device);
  // Adopts an existing allocation.
  Storage(DataPtr data, size_t nbytes, Allocator* allocator = nullptr);

  bool defined() const { return static_cast<bool>(impl_); }
  void* data() const { return impl_->data(); }
  size_t nbytes() const { return impl_->nbytes(); }
  Device device() const { return impl_->device(); }
  Allocator* allocator() const { return impl_->allocator(); }
  const DataPtr& data_ptr() const { return impl_->data_ptr(); }
  StorageImpl* impl() const { return impl_.get(); }
  int64_t use_count() const { return impl_.use_count(); }
  bool is_alias_of(const Storage& other) const { return impl_ == other.impl_; }
  uint32_t version() const { return impl_->version(); }
  void bump_version() const { impl_->bump_version(); }

 private:
  IntrusivePtr<StorageImpl> impl_;
};

}  // namespace ferry
