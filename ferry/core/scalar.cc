// Scalar: reading and writing single elements of any dtype, and printing.
#include "ferry/core/scalar.h"

#include <ostream>

namespace ferry {

Scalar Scalar::from_element(const void* element, ScalarType t) {
  return visit_dtype(t, [&]<typename T>() -> Scalar {
    if constexpr (std::is_same_v<T, bool>) {
      // Any non-zero byte is true: foreign memory (from_blob) may hold 2..255, which read as a
      // bool object would be undefined behaviour.
      return Scalar(*static_cast<const unsigned char*>(element) != 0);
    } else {
      const T value = *static_cast<const T*>(element);
      if constexpr (std::is_integral_v<T>) {
        return Scalar(static_cast<int64_t>(value));
      } else if constexpr (detail::is_complex_type<T>::value) {
        return Scalar(std::complex<double>(value));
      } else {
        return Scalar(static_cast<double>(value));
      }
    }
  });
}

void Scalar::to_element(void* element, ScalarType t) const {
  visit_dtype(t, [&]<typename T>() { *static_cast<T*>(element) = to<T>(); });
}

std::ostream& operator<<(std::ostream& out, const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool:
      return out << (s.to<bool>() ? "True" : "False");
    case Scalar::Kind::Int:
      return out << s.to<int64_t>();
    case Scalar::Kind::Double:
      return out << s.to<double>();
    case Scalar::Kind::Complex: {
      const auto c = s.to<std::complex<double>>();
      return out << c.real() << (c.imag() < 0 ? "" : "+") << c.imag() << "j";
    }
  }
  return out;
}

}  // namespace ferry
