// Test helpers for the CPU copy kernels: random CopyProblems shaped like the TensorIterator's
// (permuted, sliced, broadcast, misaligned, reordered and coalesced), random element values,
// and a naive oracle that walks every index and converts with ferry::convert_value. The oracle
// shares no code with the kernels.
#pragma once

#include <algorithm>
#include <complex>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "ferry/backends/cpu/copy_plan.h"
#include "ferry/core/convert.h"
#include "ferry/core/scalar_type.h"

namespace ferry::cpu::testing {

// A byte buffer whose data pointer sits `misalign` (< 128) bytes past a 64-byte boundary and
// whose allocation ends exactly `bytes` later, so that AddressSanitizer catches any access past
// the data. contents() are all the allocation's bytes, the misalignment padding included.
class Buffer {
 public:
  Buffer(size_t bytes, size_t misalign) : size_(misalign + bytes), misalign_(misalign) {
    void* p = nullptr;
    if (posix_memalign(&p, 64, std::max<size_t>(size_, 1)) != 0) throw std::bad_alloc();
    base_ = static_cast<unsigned char*>(p);
    std::memset(base_, 0, size_);
  }
  ~Buffer() { std::free(base_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  unsigned char* data() { return base_ + misalign_; }
  std::vector<unsigned char> contents() const {
    return std::vector<unsigned char>(base_, base_ + size_);
  }
  void set_contents(const std::vector<unsigned char>& bytes) {
    std::copy(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size_), base_);
  }
  size_t size() const { return size_; }

 private:
  unsigned char* base_ = nullptr;
  size_t size_;
  size_t misalign_;
};

// The elements' layout in one operand, in elements.
struct View {
  std::vector<int64_t> strides;
  int64_t offset = 0;
  int64_t extent = 0;  // elements the buffer must hold
};

// A random view of `shape`: memory order permuted, some dims stepped (sliced every 2nd or 3rd),
// padding around; with allow_broadcast some dims get stride 0.
inline View random_view(std::mt19937_64& rng, const std::vector<int64_t>& shape,
                        bool allow_broadcast) {
  const size_t rank = shape.size();
  std::vector<size_t> order(rank);  // order[0] is the slowest dim in memory
  std::iota(order.begin(), order.end(), size_t{0});
  if (rng() % 3 != 0) std::shuffle(order.begin(), order.end(), rng);
  View v;
  v.strides.assign(rank, 0);
  int64_t stride = 1;
  const int64_t pad = rng() % 4 == 0 ? 1 + static_cast<int64_t>(rng() % 3) : 0;
  for (size_t k = rank; k-- > 0;) {
    const size_t d = order[k];
    const int64_t step = rng() % 5 == 0 ? 2 + static_cast<int64_t>(rng() % 2) : 1;
    v.strides[d] = stride * step;
    stride *= std::max<int64_t>(shape[d], 1) * step + (rng() % 6 == 0 ? pad : 0);
  }
  if (allow_broadcast) {
    for (size_t d = 0; d < rank; ++d) {
      if (rng() % 6 == 0) v.strides[d] = 0;
    }
  }
  v.offset = pad;
  v.extent = stride + 2 * pad;
  return v;
}

// Reorders dims fastest-first for dst, drops size-1 dims and merges mergeable neighbours: the
// TensorIterator's postconditions (copy_plan.h).
inline void canonicalize(CopyProblem& p) {
  const size_t rank = p.sizes.size();
  for (size_t d = 0; d < rank; ++d) {
    if (p.sizes[d] == 0) {
      p.sizes = {0};
      p.dst_strides = {0};
      p.src_strides = {0};
      return;
    }
  }
  std::vector<size_t> dims;
  for (size_t d = 0; d < rank; ++d) {
    if (p.sizes[d] != 1) dims.push_back(d);
  }
  std::stable_sort(dims.begin(), dims.end(), [&](size_t a, size_t b) {
    if (p.dst_strides[a] != p.dst_strides[b]) return p.dst_strides[a] < p.dst_strides[b];
    return p.src_strides[a] < p.src_strides[b];
  });
  DimVector sizes, dst, src;
  for (size_t d : dims) {
    if (!sizes.empty()) {
      const size_t last = sizes.size() - 1;
      if (sizes[last] * dst[last] == p.dst_strides[d] &&
          sizes[last] * src[last] == p.src_strides[d]) {
        sizes[last] *= p.sizes[d];
        continue;
      }
    }
    sizes.push_back(p.sizes[d]);
    dst.push_back(p.dst_strides[d]);
    src.push_back(p.src_strides[d]);
  }
  p.sizes = sizes;
  p.dst_strides = dst;
  p.src_strides = src;
}

// Random bytes, half of the elements replaced by ordinary values (small integers, fractions);
// bools are 0 or 1.
inline void fill_values(std::mt19937_64& rng, ScalarType t, unsigned char* data, int64_t n) {
  const auto bytes = n * static_cast<int64_t>(element_size(t));
  for (int64_t i = 0; i < bytes; i += 8) {
    const uint64_t r = rng();
    std::memcpy(data + i, &r, static_cast<size_t>(std::min<int64_t>(8, bytes - i)));
  }
  visit_dtype(t, [&]<typename T>() {
    for (int64_t i = 0; i < n; ++i) {
      unsigned char* p = data + i * static_cast<int64_t>(sizeof(T));
      if constexpr (std::is_same_v<T, bool>) {
        *p &= 1;
      } else {
        const uint64_t r = rng();
        if (r % 2 == 0) {
          // Integers in [-300, 300], or thousandths of them.
          double x = static_cast<double>(static_cast<int64_t>((r >> 8) % 601) - 300);
          if ((r >> 1) % 2 == 0) x += static_cast<double>((r >> 32) % 1000) / 1000.0;
          const T v = convert_value<T>(x);
          std::memcpy(p, &v, sizeof(T));
        }
      }
    }
  });
}

template <typename T>
T naive_negate(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v;
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(
        static_cast<std::make_unsigned_t<T>>(0u - static_cast<std::make_unsigned_t<T>>(v)));
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T::from_bits(static_cast<uint16_t>(v.bits ^ 0x8000u));
  } else if constexpr (std::is_same_v<T, Float8_e4m3fn> || std::is_same_v<T, Float8_e5m2>) {
    return T::from_bits(static_cast<uint8_t>(v.bits ^ 0x80u));
  } else {
    return -v;
  }
}

// One element of the oracle, src bytes to dst bytes: convert_value, then the conj/neg bits.
// Instantiated per dtype pair; naive_copy's walk is written once.
template <typename D, typename S>
void naive_convert(const char* in, char* out, bool conj, bool neg) {
  S s;
  std::memcpy(&s, in, sizeof(S));
  D v = convert_value<D>(s);
  if constexpr (std::is_same_v<D, std::complex<float>> || std::is_same_v<D, std::complex<double>>) {
    if (conj) v = std::conj(v);
  }
  if (neg) v = naive_negate(v);
  std::memcpy(out, &v, sizeof(D));
}

// The oracle: every index in turn (dim 0 fastest, an odometer over the others), one
// convert_value each.
inline void naive_copy(const CopyProblem& p) {
  const int64_t n = p.numel();
  if (n == 0) return;
  using Convert = void (*)(const char*, char*, bool, bool);
  const Convert convert = visit_dtype(p.dst_dtype, [&]<typename D>() {
    return visit_dtype(p.src_dtype, [&]<typename S>() -> Convert { return &naive_convert<D, S>; });
  });
  std::vector<int64_t> index(static_cast<size_t>(p.ndim()), 0);
  int64_t dst_off = 0, src_off = 0;
  for (int64_t linear = 0; linear < n; ++linear) {
    convert(p.src + src_off, p.dst + dst_off, p.conj, p.neg);
    for (size_t d = 0; d < index.size(); ++d) {
      dst_off += p.dst_strides[d];
      src_off += p.src_strides[d];
      if (++index[d] < p.sizes[d]) break;
      dst_off -= p.sizes[d] * p.dst_strides[d];
      src_off -= p.sizes[d] * p.src_strides[d];
      index[d] = 0;
    }
  }
}

// "" when equal, else where the first difference is and the bytes around it.
inline std::string first_difference(const std::vector<unsigned char>& expected,
                                    const std::vector<unsigned char>& actual) {
  if (expected == actual) return "";
  std::ostringstream out;
  for (size_t i = 0; i < std::min(expected.size(), actual.size()); ++i) {
    if (expected[i] != actual[i]) {
      out << "first difference at byte " << i << ": expected";
      for (size_t k = i; k < std::min(i + 16, expected.size()); ++k) out << ' ' << int(expected[k]);
      out << ", got";
      for (size_t k = i; k < std::min(i + 16, actual.size()); ++k) out << ' ' << int(actual[k]);
      return out.str();
    }
  }
  return "sizes differ";
}

inline std::string describe_problem(const CopyProblem& p) {
  std::ostringstream out;
  out << scalar_type_name(p.src_dtype) << " -> " << scalar_type_name(p.dst_dtype)
      << (p.conj ? " conj" : "") << (p.neg ? " neg" : "") << " sizes [";
  for (int64_t s : p.sizes) out << s << ' ';
  out << "] dst strides [";
  for (int64_t s : p.dst_strides) out << s << ' ';
  out << "] src strides [";
  for (int64_t s : p.src_strides) out << s << ' ';
  out << "] dst%64=" << reinterpret_cast<uintptr_t>(p.dst) % 64
      << " src%64=" << reinterpret_cast<uintptr_t>(p.src) % 64;
  return out.str();
}

}  // namespace ferry::cpu::testing
