// ArrayRef: a non-owning view of a contiguous run of values, as c10::ArrayRef.
// Constructible from braced lists, vectors, SmallVectors and std::arrays so that
// `t.view({2, 3})` and `t.view(other.sizes())` both work. The caller keeps the data alive.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <vector>

namespace ferry {

template <typename T>
class ArrayRef {
 public:
  using value_type = T;
  using iterator = const T*;
  using const_iterator = const T*;

  constexpr ArrayRef() = default;
  constexpr ArrayRef(const T& one) : data_(&one), size_(1) {}  // NOLINT
  constexpr ArrayRef(const T* data, size_t size) : data_(data), size_(size) {}
  // The list outlives the full-expression that uses it, which is all a parameter needs.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  constexpr ArrayRef(std::initializer_list<T> list)  // NOLINT
      : data_(list.begin() == list.end() ? nullptr : list.begin()), size_(list.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  // Any contiguous container of T with data() and size(): std::vector, std::array, std::span,
  // SmallVector.
  template <
      typename C, typename = decltype(std::declval<const C&>().data()),
      typename = std::enable_if_t<std::is_same_v<
          std::remove_cv_t<std::remove_pointer_t<decltype(std::declval<const C&>().data())>>, T>>>
  constexpr ArrayRef(const C& c) : data_(c.data()), size_(c.size()) {}  // NOLINT

  constexpr const T* data() const { return data_; }
  constexpr size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr const T* begin() const { return data_; }
  constexpr const T* end() const { return data_ + size_; }
  constexpr const T& operator[](size_t i) const { return data_[i]; }
  constexpr const T& front() const { return data_[0]; }
  constexpr const T& back() const { return data_[size_ - 1]; }
  constexpr ArrayRef slice(size_t start, size_t length) const {
    return ArrayRef(data_ + start, length);
  }
  constexpr ArrayRef slice(size_t start) const { return slice(start, size_ - start); }

  bool equals(ArrayRef other) const {
    return size_ == other.size_ && std::equal(begin(), end(), other.begin());
  }
  std::vector<T> vec() const { return std::vector<T>(begin(), end()); }

  friend bool operator==(ArrayRef a, ArrayRef b) { return a.equals(b); }

 private:
  const T* data_ = nullptr;
  size_t size_ = 0;
};

using IntArrayRef = ArrayRef<int64_t>;

// Prints as [2, 3, 4], the way PyTorch prints sizes.
template <typename T>
std::ostream& operator<<(std::ostream& out, ArrayRef<T> values) {
  out << '[';
  for (size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  return out << ']';
}

}  // namespace ferry
