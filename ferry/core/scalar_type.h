// ScalarType: the 14 element types ferry moves, their C++ value types, names and sizes.
// FERRY_FORALL_SCALAR_TYPES lists (C++ type, enumerator) pairs in enum order; visit_dtype
// calls a template lambda with the C++ type of a runtime ScalarType.
#pragma once

#include <complex>
#include <cstdint>
#include <iosfwd>
#include <string_view>

#include "ferry/core/bfloat16.h"
#include "ferry/core/error.h"
#include "ferry/core/float8.h"
#include "ferry/core/half.h"

namespace ferry {

#define FERRY_FORALL_SCALAR_TYPES(_)       \
  _(bool, Bool)                            \
  _(uint8_t, UInt8)                        \
  _(int8_t, Int8)                          \
  _(int16_t, Int16)                        \
  _(int32_t, Int32)                        \
  _(int64_t, Int64)                        \
  _(::ferry::Half, Float16)                \
  _(::ferry::BFloat16, BFloat16)           \
  _(float, Float32)                        \
  _(double, Float64)                       \
  _(std::complex<float>, Complex64)        \
  _(std::complex<double>, Complex128)      \
  _(::ferry::Float8_e4m3fn, Float8_e4m3fn) \
  _(::ferry::Float8_e5m2, Float8_e5m2)

enum class ScalarType : int8_t {
#define FERRY_ENUMERATOR(cpp, name) name,
  FERRY_FORALL_SCALAR_TYPES(FERRY_ENUMERATOR)
#undef FERRY_ENUMERATOR
  // PyTorch's enumerator names, as aliases (same values: a switch needs only one of each pair).
  Byte = UInt8,
  Char = Int8,
  Short = Int16,
  Int = Int32,
  Long = Int64,
  Half = Float16,
  Float = Float32,
  Double = Float64,
  ComplexFloat = Complex64,
  ComplexDouble = Complex128,
};
inline constexpr int kNumScalarTypes = 14;

inline constexpr ScalarType kBool = ScalarType::Bool;
inline constexpr ScalarType kUInt8 = ScalarType::UInt8;
inline constexpr ScalarType kInt8 = ScalarType::Int8;
inline constexpr ScalarType kInt16 = ScalarType::Int16;
inline constexpr ScalarType kInt32 = ScalarType::Int32;
inline constexpr ScalarType kInt64 = ScalarType::Int64;
inline constexpr ScalarType kFloat16 = ScalarType::Float16;
inline constexpr ScalarType kBFloat16 = ScalarType::BFloat16;
inline constexpr ScalarType kFloat32 = ScalarType::Float32;
inline constexpr ScalarType kFloat64 = ScalarType::Float64;
inline constexpr ScalarType kComplex64 = ScalarType::Complex64;
inline constexpr ScalarType kComplex128 = ScalarType::Complex128;
inline constexpr ScalarType kFloat8_e4m3fn = ScalarType::Float8_e4m3fn;
inline constexpr ScalarType kFloat8_e5m2 = ScalarType::Float8_e5m2;
// PyTorch's short names.
inline constexpr ScalarType kByte = kUInt8;
inline constexpr ScalarType kChar = kInt8;
inline constexpr ScalarType kShort = kInt16;
inline constexpr ScalarType kInt = kInt32;
inline constexpr ScalarType kLong = kInt64;
inline constexpr ScalarType kHalf = kFloat16;
inline constexpr ScalarType kFloat = kFloat32;
inline constexpr ScalarType kDouble = kFloat64;
inline constexpr ScalarType kComplexFloat = kComplex64;
inline constexpr ScalarType kComplexDouble = kComplex128;

// The C++ value type of a ScalarType, and back.
template <ScalarType S>
struct CppTypeOf;
template <typename T>
struct ScalarTypeOf;
#define FERRY_TYPE_MAPPING(cpp, name)                     \
  template <>                                             \
  struct CppTypeOf<ScalarType::name> {                    \
    using type = cpp;                                     \
  };                                                      \
  template <>                                             \
  struct ScalarTypeOf<cpp> {                              \
    static constexpr ScalarType value = ScalarType::name; \
  };
FERRY_FORALL_SCALAR_TYPES(FERRY_TYPE_MAPPING)
#undef FERRY_TYPE_MAPPING
template <ScalarType S>
using cpp_type_t = typename CppTypeOf<S>::type;
template <typename T>
inline constexpr ScalarType scalar_type_v = ScalarTypeOf<T>::value;

constexpr size_t element_size(ScalarType t) {
  switch (t) {
#define FERRY_SIZE_CASE(cpp, name) \
  case ScalarType::name:           \
    return sizeof(cpp);
    FERRY_FORALL_SCALAR_TYPES(FERRY_SIZE_CASE)
#undef FERRY_SIZE_CASE
  }
  return 0;
}

constexpr bool is_complex(ScalarType t) { return t == kComplex64 || t == kComplex128; }
constexpr bool is_floating_point(ScalarType t) {
  return t == kFloat16 || t == kBFloat16 || t == kFloat32 || t == kFloat64 || t == kFloat8_e4m3fn ||
         t == kFloat8_e5m2;
}
constexpr bool is_integral(ScalarType t, bool include_bool = false) {
  return (include_bool && t == kBool) || t == kUInt8 || t == kInt8 || t == kInt16 || t == kInt32 ||
         t == kInt64;
}
// Floating-point types narrower than float32, whose arithmetic goes through float.
constexpr bool is_reduced_floating_point(ScalarType t) {
  return t == kFloat16 || t == kBFloat16 || t == kFloat8_e4m3fn || t == kFloat8_e5m2;
}
// The real type of a complex type (Complex64 -> Float32); other types map to themselves.
constexpr ScalarType to_real_value_type(ScalarType t) {
  return t == kComplex64 ? kFloat32 : t == kComplex128 ? kFloat64 : t;
}

// "Float32", "BFloat16", ...: the enumerator's name.
std::string_view scalar_type_name(ScalarType t);
// "float32", "bfloat16", ...: the dtype name PyTorch prints after "torch.".
std::string_view dtype_name(ScalarType t);
// Parses enumerator names, dtype names, PyTorch's aliases ("float", "half", "long") and short
// forms ("f32", "bf16", "i64", "c64", "e4m3", "e5m2"). Raises DTypeError naming the string.
ScalarType parse_scalar_type(std::string_view name);
std::ostream& operator<<(std::ostream& out, ScalarType t);

// Calls fn.template operator()<T>() with T the C++ type of `t`; returns what fn returns.
//   visit_dtype(t, [&]<typename T>() { ... });
template <typename Fn>
decltype(auto) visit_dtype(ScalarType t, Fn&& fn) {
  switch (t) {
#define FERRY_VISIT_CASE(cpp, name) \
  case ScalarType::name:            \
    return fn.template operator()<cpp>();
    FERRY_FORALL_SCALAR_TYPES(FERRY_VISIT_CASE)
#undef FERRY_VISIT_CASE
  }
  FERRY_FAIL_AS(DTypeError, "expected one of the 14 ferry dtypes, but got the value ",
                static_cast<int>(t));
}

}  // namespace ferry
