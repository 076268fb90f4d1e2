// Intrusive reference counting for ferry's shared objects (tensors, storages).
// The count lives in the object, so a handle is one pointer and copying it is one atomic
// increment; the object is deleted when the last handle goes away.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace ferry {

class RefCounted {
 public:
  RefCounted() = default;
  RefCounted(const RefCounted&) = delete;
  RefCounted& operator=(const RefCounted&) = delete;

  int64_t use_count() const { return refcount_.load(std::memory_order_relaxed); }

 protected:
  virtual ~RefCounted() = default;

 private:
  template <typename T>
  friend class IntrusivePtr;

  void retain() const { refcount_.fetch_add(1, std::memory_order_relaxed); }
  // Acquire-release so that writes made through other handles happen-before the delete.
  void release() const {
    if (refcount_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  mutable std::atomic<int64_t> refcount_{0};
};

template <typename T>
class IntrusivePtr {
 public:
  IntrusivePtr() = default;
  IntrusivePtr(std::nullptr_t) {}  // NOLINT
  // Takes a (possibly shared) reference to `p`.
  explicit IntrusivePtr(T* p) : ptr_(p) {
    if (ptr_) ptr_->retain();
  }
  IntrusivePtr(const IntrusivePtr& other) : ptr_(other.ptr_) {
    if (ptr_) ptr_->retain();
  }
  IntrusivePtr(IntrusivePtr&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)) {}
  template <typename U, typename = std::enable_if_t<std::is_convertible_v<U*, T*>>>
  IntrusivePtr(IntrusivePtr<U> other) : ptr_(other.release_raw()) {}  // NOLINT
  ~IntrusivePtr() { reset(); }

  IntrusivePtr& operator=(IntrusivePtr other) noexcept {
    std::swap(ptr_, other.ptr_);
    return *this;
  }

  void reset() {
    if (ptr_) std::exchange(ptr_, nullptr)->release();
  }

  T* get() const { return ptr_; }
  T* operator->() const { return ptr_; }
  T& operator*() const { return *ptr_; }
  explicit operator bool() const { return ptr_ != nullptr; }
  int64_t use_count() const { return ptr_ ? ptr_->use_count() : 0; }

  friend bool operator==(const IntrusivePtr& a, const IntrusivePtr& b) { return a.ptr_ == b.ptr_; }

  // Gives up ownership without releasing: for converting moves between pointer types.
  T* release_raw() { return std::exchange(ptr_, nullptr); }

 private:
  T* ptr_ = nullptr;
};

template <typename T, typename... Args>
IntrusivePtr<T> make_intrusive(Args&&... args) {
  return IntrusivePtr<T>(new T(std::forward<Args>(args)...));
}

}  // namespace ferry
