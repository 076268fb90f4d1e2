// Scalar: one number of any ferry dtype, held as bool, int64, double or complex<double>.
// It carries values into fill_/full and out of item(); conversion to a C++ type follows the
// copy rules (complex to real keeps the real part, float to integer truncates).
#pragma once

#include <complex>
#include <cstdint>
#include <iosfwd>
#include <type_traits>

#include "ferry/core/convert.h"
#include "ferry/core/scalar_type.h"

namespace ferry {

class Scalar {
 public:
  enum class Kind : int8_t { Bool, Int, Double, Complex };

  Scalar() : Scalar(int64_t{0}) {}
  Scalar(bool v) : kind_(Kind::Bool), i_(v) {}  // NOLINT
  template <typename T,
            std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int), i_(static_cast<int64_t>(v)) {}  // NOLINT
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::Double), d_(static_cast<double>(v)) {}  // NOLINT
  Scalar(Half v) : Scalar(static_cast<float>(v)) {}                 // NOLINT
  Scalar(BFloat16 v) : Scalar(static_cast<float>(v)) {}             // NOLINT
  Scalar(Float8_e4m3fn v) : Scalar(static_cast<float>(v)) {}        // NOLINT
  Scalar(Float8_e5m2 v) : Scalar(static_cast<float>(v)) {}          // NOLINT
  template <typename T>
  Scalar(std::complex<T> v) : kind_(Kind::Complex), c_(v) {}  // NOLINT

  Kind kind() const { return kind_; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_floating_point() const { return kind_ == Kind::Double; }
  bool is_complex() const { return kind_ == Kind::Complex; }

  // The value converted to T with the copy rules.
  template <typename T>
  T to() const {
    switch (kind_) {
      case Kind::Bool:
        return convert_value<T>(i_ != 0);
      case Kind::Int:
        return convert_value<T>(i_);
      case Kind::Double:
        return convert_value<T>(d_);
      case Kind::Complex:
        return convert_value<T>(c_);
    }
    return T{};
  }

  // The value as the Scalar kind that PyTorch would give an element of dtype `t`.
  static Scalar from_element(const void* element, ScalarType t);
  // Writes the value converted to `t` into `element`.
  void to_element(void* element, ScalarType t) const;

 private:
  Kind kind_;
  int64_t i_ = 0;
  double d_ = 0;
  std::complex<double> c_;
};

std::ostream& operator<<(std::ostream& out, const Scalar& s);

}  // namespace ferry
