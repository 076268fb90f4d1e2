// SmallVector: a vector of trivially copyable values that keeps up to N of them inline.
// Tensor sizes and strides use DimVector (N = 6), so ordinary tensors never touch the heap
// for their shape. Growing past N moves the values to the heap; behaviour is otherwise a
// std::vector's.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>
#include <type_traits>

#include "ferry/core/array_ref.h"

namespace ferry {

template <typename T, size_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVector holds trivially copyable values");

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  SmallVector() = default;
  explicit SmallVector(size_t count, T value = T()) { assign(count, value); }
  SmallVector(std::initializer_list<T> list) { assign(list.begin(), list.end()); }
  SmallVector(ArrayRef<T> values) { assign(values.begin(), values.end()); }  // NOLINT
  template <typename It, typename = decltype(*std::declval<It>())>
  SmallVector(It first, It last) {
    assign(first, last);
  }
  SmallVector(const SmallVector& other) { assign(other.begin(), other.end()); }
  SmallVector(SmallVector&& other) noexcept { steal(other); }
  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  SmallVector& operator=(SmallVector&& other) noexcept {
    if (this != &other) {
      free_heap();
      steal(other);
    }
    return *this;
  }
  ~SmallVector() { free_heap(); }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  bool empty() const { return size_ == 0; }
  bool is_inline() const { return data_ == inline_; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& front() { return data_[0]; }
  T& back() { return data_[size_ - 1]; }
  const T& front() const { return data_[0]; }
  const T& back() const { return data_[size_ - 1]; }
  operator ArrayRef<T>() const { return ArrayRef<T>(data_, size_); }  // NOLINT

  void reserve(size_t n) {
    if (n > capacity_) grow(n);
  }
  void resize(size_t n, T value = T()) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data_[i] = value;
    size_ = n;
  }
  void clear() { size_ = 0; }
  void push_back(T value) {
    if (size_ == capacity_) grow(capacity_ * 2);
    data_[size_++] = value;
  }
  void pop_back() { --size_; }
  T* insert(T* pos, T value) {
    const size_t at = static_cast<size_t>(pos - data_);
    if (size_ == capacity_) grow(capacity_ * 2);
    std::memmove(data_ + at + 1, data_ + at, (size_ - at) * sizeof(T));
    data_[at] = value;
    ++size_;
    return data_ + at;
  }
  T* erase(T* pos) {
    const size_t at = static_cast<size_t>(pos - data_);
    std::memmove(data_ + at, data_ + at + 1, (size_ - at - 1) * sizeof(T));
    --size_;
    return data_ + at;
  }
  void assign(size_t count, T value) {
    size_ = 0;
    resize(count, value);
  }
  template <typename It>
  void assign(It first, It last) {
    const auto count = static_cast<size_t>(std::distance(first, last));
    size_ = 0;
    reserve(count);
    std::copy(first, last, data_);
    size_ = count;
  }

  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  void grow(size_t n) {
    n = std::max<size_t>(n, 2 * N);
    T* fresh = static_cast<T*>(std::malloc(n * sizeof(T)));
    if (fresh == nullptr) throw std::bad_alloc();
    if (size_ > 0) std::memcpy(fresh, data_, size_ * sizeof(T));
    free_heap();
    data_ = fresh;
    capacity_ = n;
  }
  void free_heap() {
    if (data_ != inline_) std::free(data_);
    data_ = inline_;
    capacity_ = N;
  }
  void steal(SmallVector& other) {
    if (other.data_ == other.inline_) {
      data_ = inline_;
      capacity_ = N;
      if (other.size_ > 0) std::memcpy(inline_, other.inline_, other.size_ * sizeof(T));
    } else {
      data_ = other.data_;
      capacity_ = other.capacity_;
    }
    size_ = other.size_;
    other.data_ = other.inline_;
    other.capacity_ = N;
    other.size_ = 0;
  }

  T* data_ = inline_;
  size_t size_ = 0;
  size_t capacity_ = N;
  T inline_[N];
};

// Sizes and strides: inline up to 6 dimensions.
inline constexpr size_t kInlineDims = 6;
using DimVector = SmallVector<int64_t, kInlineDims>;

}  // namespace ferry
