// The test oracle for copies: what dst's storage must hold after dst.copy_(src), computed
// element by element from logical indices (no iterator, no strides walk, no ferry kernel),
// from snapshots of both storages taken before the copy. Also random values and random views.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ferry/core/convert.h"
#include "ferry/ferry.h"

namespace ferry::testing {

// The bytes of a tensor's storage, from its start.
inline std::vector<uint8_t> storage_bytes(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.storage().data());
  return std::vector<uint8_t>(p, p + t.storage().nbytes());
}

// Up to this many dimensions; the oracle keeps indices in fixed arrays (it runs per element).
inline constexpr size_t kMaxRank = 8;

// Byte offset of element `index` (rank entries) from the storage's start.
inline int64_t byte_offset(const Tensor& t, const int64_t* index) {
  int64_t off = t.storage_offset();
  for (size_t d = 0; d < static_cast<size_t>(t.dim()); ++d) off += index[d] * t.strides()[d];
  return off * static_cast<int64_t>(t.element_size());
}

// The logical index of element `linear` of a shape, row-major.
inline void unravel(int64_t linear, IntArrayRef sizes, int64_t* index) {
  for (size_t d = sizes.size(); d-- > 0;) {
    index[d] = linear % sizes[d];
    linear /= sizes[d];
  }
}

namespace naive {

template <typename T>
T read(const uint8_t* p) {
  if constexpr (std::is_same_v<T, bool>) {
    return *p != 0;
  } else {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  }
}

// Negation in T: wrap-around for integers, through float for the narrow float types.
template <typename T>
T negate(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v;
  } else if constexpr (std::is_integral_v<T>) {
    // -v modulo 2^64, whose low bits are -v modulo 2^n; unsigned, so INT64_MIN is defined.
    return static_cast<T>(uint64_t{0} - static_cast<uint64_t>(static_cast<int64_t>(v)));
  } else if constexpr (std::is_class_v<T> && !std::is_same_v<T, std::complex<float>> &&
                       !std::is_same_v<T, std::complex<double>>) {
    return T(-static_cast<float>(v));
  } else {
    return -v;
  }
}

template <typename T>
bool is_nan(T v) {
  if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
    return false;  // compared part by part in same_value
  } else if constexpr (std::is_integral_v<T>) {
    return false;
  } else {
    return std::isnan(static_cast<double>(static_cast<float>(v)));
  }
}

// Bit-identical, or both NaN (a NaN's sign and payload are not specified).
template <typename T>
bool same_value(T a, T b) {
  if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
    return same_value(a.real(), b.real()) && same_value(a.imag(), b.imag());
  } else {
    if (std::memcmp(&a, &b, sizeof(T)) == 0) return true;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      return std::isnan(a) && std::isnan(b);
    } else {
      return is_nan(a) && is_nan(b);
    }
  }
}

template <typename T>
std::string show(T v) {
  std::ostringstream out;
  if constexpr (std::is_same_v<T, bool>) {
    out << (v ? "true" : "false");
  } else if constexpr (std::is_integral_v<T>) {
    out << static_cast<int64_t>(v);
  } else if constexpr (std::is_same_v<T, std::complex<float>> ||
                       std::is_same_v<T, std::complex<double>>) {
    out << v;
  } else {
    out << static_cast<double>(static_cast<float>(v));
  }
  return out.str();
}

}  // namespace naive

// One element of the oracle: src's element at `in` converted to dst's dtype with the conj/neg
// bits applied, written to `out`. Instantiated per dtype pair; check_copy's loop is written once
// and calls it through a pointer (the loop per pair made this header the suites' costliest code
// to compile).
using ConvertElement = void (*)(const uint8_t* in, uint8_t* out, bool conj, bool neg);
template <typename D, typename S>
void convert_element(const uint8_t* in, uint8_t* out, bool conj, bool neg) {
  D v = convert_value<D>(naive::read<S>(in));
  if constexpr (std::is_same_v<D, std::complex<float>> || std::is_same_v<D, std::complex<double>>) {
    if (conj) v = std::conj(v);
  }
  if (neg) v = naive::negate(v);
  std::memcpy(out, &v, sizeof(D));
}

// Per dtype: are two elements the same value (naive::same_value), and how an element prints.
struct ElementOps {
  bool (*same)(const uint8_t* a, const uint8_t* b);
  std::string (*show)(const uint8_t* p);
};
inline ElementOps element_ops(ScalarType t) {
  return visit_dtype(t, [&]<typename T>() {
    return ElementOps{[](const uint8_t* a, const uint8_t* b) {
                        return naive::same_value(naive::read<T>(a), naive::read<T>(b));
                      },
                      [](const uint8_t* p) { return naive::show(naive::read<T>(p)); }};
  });
}

// Checks that `dst` (after dst.copy_(src)) holds what the copy should have written, given the
// storages' bytes before the copy. Elements of dst get
//   neg?(conj?(convert_value<dst dtype>(src element)))  (bits applied where dst's and src's differ)
// with src broadcast to dst's sizes; every other byte of dst's storage is unchanged. Reports
// the first few differences through gtest and returns whether all matched.
inline bool check_copy(const Tensor& dst, const Tensor& src, const std::vector<uint8_t>& dst_before,
                       const std::vector<uint8_t>& src_before) {
  const std::vector<uint8_t> after = storage_bytes(dst);
  std::vector<uint8_t> expected = dst_before;
  std::vector<bool> is_element(after.size(), false);
  const auto dst_rank = static_cast<size_t>(dst.dim());
  const auto src_rank = static_cast<size_t>(src.dim());
  EXPECT_LE(dst_rank, kMaxRank);
  if (dst_rank > kMaxRank) return false;
  const ConvertElement convert = visit_dtype(dst.dtype(), [&]<typename D>() {
    return visit_dtype(src.dtype(),
                       [&]<typename S>() -> ConvertElement { return &convert_element<D, S>; });
  });
  const ElementOps dst_ops = element_ops(dst.dtype()), src_ops = element_ops(src.dtype());
  const bool conj = is_complex(dst.dtype()) && dst.is_conj() != src.is_conj();
  const bool neg = dst.is_neg() != src.is_neg();
  const size_t item = dst.element_size();
  const bool is_bool = dst.dtype() == kBool;
  int failures = 0;
  for (int64_t i = 0; i < dst.numel(); ++i) {
    int64_t di[kMaxRank], si[kMaxRank];
    unravel(i, dst.sizes(), di);
    for (size_t k = 0; k < src_rank; ++k) {
      const size_t d = dst_rank - src_rank + k;
      si[k] = src.sizes()[k] == 1 ? 0 : di[d];
    }
    const uint8_t* s = src_before.data() + byte_offset(src, si);
    const auto at = static_cast<size_t>(byte_offset(dst, di));
    uint8_t* want = expected.data() + at;
    convert(s, want, conj, neg);
    for (size_t b = 0; b < item; ++b) is_element[at + b] = true;
    const uint8_t* got = after.data() + at;
    if (!dst_ops.same(got, want) || (is_bool && *got > 1)) {
      if (++failures <= 5) {
        std::ostringstream where;
        for (size_t d = 0; d < dst_rank; ++d) where << di[d] << ' ';
        ADD_FAILURE() << "element [ " << where.str() << "] of " << dst.dtype() << " dst from "
                      << src.dtype() << " src value " << src_ops.show(s) << ": expected "
                      << dst_ops.show(want) << ", got " << dst_ops.show(got);
      }
    }
  }
  for (size_t b = 0; b < after.size(); ++b) {
    if (!is_element[b] && after[b] != expected[b]) {
      if (++failures <= 5) ADD_FAILURE() << "byte " << b << " outside dst's elements was written";
    }
  }
  return failures == 0;
}

// Fills the storage with random values of `dtype`: half of the time raw random bits (NaN, inf,
// huge and tiny values included), else values in [-300, 300] with fractions. Bool gets 0/1.
inline void fill_random(const Tensor& t, std::mt19937_64& rng) {
  auto* p = static_cast<uint8_t*>(t.storage().data());
  const size_t n = t.storage().nbytes();
  const size_t item = t.element_size();
  const bool raw = rng() % 2 == 0;
  visit_dtype(t.dtype(), [&]<typename T>() {
    std::uniform_real_distribution<double> nice(-300.0, 300.0);
    for (size_t at = 0; at + item <= n; at += item) {
      T v;
      if constexpr (std::is_same_v<T, bool>) {
        v = rng() % 2 == 1;
      } else if (raw) {
        const uint64_t bits[2] = {rng(), rng()};
        std::memcpy(&v, bits, sizeof(T));
      } else {
        double x = nice(rng);
        if (rng() % 2 == 0) x = std::trunc(x);
        v = convert_value<T>(std::complex<double>(x, nice(rng)));
      }
      std::memcpy(p + at, &v, sizeof(T));
    }
  });
}

// A random view with `sizes`: a permuted, stepped slice at an offset inside a larger buffer
// (so bytes around it exist and must stay untouched); with `broadcast`, some dimensions are
// size 1 expanded (stride 0) and some leading dimensions may be missing.
inline Tensor random_view(std::mt19937_64& rng, IntArrayRef sizes, ScalarType dtype, bool broadcast,
                          bool contiguous = false, int64_t max_step = 3) {
  std::vector<int64_t> own(sizes.begin(), sizes.end());
  if (broadcast) {
    const size_t drop = own.empty() ? 0 : rng() % (own.size() + 1) / 2;
    own.erase(own.begin(), own.begin() + static_cast<int64_t>(drop));
    for (auto& s : own) {
      if (rng() % 4 == 0) s = 1;
    }
  }
  const auto rank = static_cast<int64_t>(own.size());
  std::vector<int64_t> perm(static_cast<size_t>(rank)), steps(static_cast<size_t>(rank), 1);
  std::iota(perm.begin(), perm.end(), 0);
  if (!contiguous) {
    std::shuffle(perm.begin(), perm.end(), rng);
    for (auto& s : steps) {
      s = max_step > 1 && rng() % 3 == 0
              ? 2 + static_cast<int64_t>(rng() % static_cast<uint64_t>(max_step - 1))
              : 1;
    }
  }
  std::vector<int64_t> base(static_cast<size_t>(rank));
  for (int64_t k = 0; k < rank; ++k) base[k] = own[perm[k]] * steps[perm[k]];
  const int64_t lead = static_cast<int64_t>(rng() % 4), tail = static_cast<int64_t>(rng() % 4);
  int64_t numel = 1;
  for (int64_t b : base) numel *= b;
  Tensor flat = empty({lead + numel + tail}, dtype);
  Tensor t = flat.slice(0, lead, lead + numel).view(base);
  std::vector<int64_t> inverse(static_cast<size_t>(rank));
  for (int64_t k = 0; k < rank; ++k) inverse[perm[k]] = k;
  t = t.permute(inverse);
  for (int64_t d = 0; d < rank; ++d) {
    if (steps[d] > 1) t = t.slice(d, 0, std::nullopt, steps[d]);
  }
  return broadcast ? t.expand(sizes) : t;
}

}  // namespace ferry::testing
