// Intrusive reference counting for ferry's shared objects (tensors, storages, autograd nodes).
// The counts live in the object, so a handle is one pointer and copying it is one atomic
// increment. Strong handles (IntrusivePtr) keep the object alive; weak handles
// (WeakIntrusivePtr) keep only its memory and can be upgraded while a strong handle exists.
// When the last strong handle goes away the object's release_resources() runs (and, if no weak
// handle remains, the object is deleted); the memory goes when the last weak handle does.
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
  // Weak handles, not counting the one that all strong handles share.
  int64_t weak_use_count() const {
    const int64_t w = weakcount_.load(std::memory_order_relaxed);
    return use_count() > 0 ? w - 1 : w;
  }

 protected:
  virtual ~RefCounted() = default;
  // Called once, when the last strong handle goes away while weak handles may remain: drop
  // what the object owns (other objects, memory) so that weak handles pin only its shell.
  virtual void release_resources() {}

 private:
  template <typename T>
  friend class IntrusivePtr;
  template <typename T>
  friend class WeakIntrusivePtr;

  void retain() const { refcount_.fetch_add(1, std::memory_order_relaxed); }
  // Acquire-release so that writes made through other handles happen-before the delete.
  void release() const {
    if (refcount_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // Fast path: no weak handle ever existed (weakcount is the strong handles' share, 1).
      if (weakcount_.load(std::memory_order_acquire) == 1) {
        delete this;
        return;
      }
      const_cast<RefCounted*>(this)->release_resources();
      release_weak();
    }
  }
  void retain_weak() const { weakcount_.fetch_add(1, std::memory_order_relaxed); }
  void release_weak() const {
    if (weakcount_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  // A strong reference if the object is still alive (for WeakIntrusivePtr::lock).
  bool try_retain() const {
    int64_t n = refcount_.load(std::memory_order_relaxed);
    while (n > 0) {
      if (refcount_.compare_exchange_weak(n, n + 1, std::memory_order_acq_rel)) return true;
    }
    return false;
  }

  mutable std::atomic<int64_t> refcount_{0};
  // The weak handles plus one shared by all strong handles (while any exists).
  mutable std::atomic<int64_t> weakcount_{1};
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
  // Adopts a reference already counted for this handle (the inverse of release_raw).
  static IntrusivePtr adopt(T* p) {
    IntrusivePtr out;
    out.ptr_ = p;
    return out;
  }

 private:
  T* ptr_ = nullptr;
};

template <typename T, typename... Args>
IntrusivePtr<T> make_intrusive(Args&&... args) {
  return IntrusivePtr<T>(new T(std::forward<Args>(args)...));
}

// A handle that does not keep the object alive: lock() gives a strong handle while one exists
// elsewhere, else an empty one. Used where holding a strong handle would make a cycle (a leaf's
// gradient accumulator, a saved output's grad_fn).
template <typename T>
class WeakIntrusivePtr {
 public:
  WeakIntrusivePtr() = default;
  explicit WeakIntrusivePtr(const IntrusivePtr<T>& strong) : ptr_(strong.get()) {
    if (ptr_) ptr_->retain_weak();
  }
  WeakIntrusivePtr(const WeakIntrusivePtr& other) : ptr_(other.ptr_) {
    if (ptr_) ptr_->retain_weak();
  }
  WeakIntrusivePtr(WeakIntrusivePtr&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)) {}
  ~WeakIntrusivePtr() { reset(); }
  WeakIntrusivePtr& operator=(WeakIntrusivePtr other) noexcept {
    std::swap(ptr_, other.ptr_);
    return *this;
  }

  void reset() {
    if (ptr_) std::exchange(ptr_, nullptr)->release_weak();
  }
  IntrusivePtr<T> lock() const {
    if (ptr_ != nullptr && ptr_->try_retain()) return IntrusivePtr<T>::adopt(ptr_);
    return IntrusivePtr<T>();
  }
  bool expired() const { return ptr_ == nullptr || ptr_->use_count() == 0; }
  // Whether this handle names `p` (alive or not); never dereferences.
  bool refers_to(const T* p) const { return ptr_ == p; }

 private:
  T* ptr_ = nullptr;
};

}  // namespace ferry
