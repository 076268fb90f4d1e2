// Names and parsing of ScalarType.
#include "ferry/core/scalar_type.h"

#include <array>
#include <ostream>
#include <string>
#include <utility>

namespace ferry {

std::string_view scalar_type_name(ScalarType t) {
  switch (t) {
#define FERRY_NAME_CASE(cpp, name) \
  case ScalarType::name:           \
    return #name;
    FERRY_FORALL_SCALAR_TYPES(FERRY_NAME_CASE)
#undef FERRY_NAME_CASE
  }
  return "Unknown";
}

std::string_view dtype_name(ScalarType t) {
  switch (t) {
    case kBool:
      return "bool";
    case kUInt8:
      return "uint8";
    case kInt8:
      return "int8";
    case kInt16:
      return "int16";
    case kInt32:
      return "int32";
    case kInt64:
      return "int64";
    case kFloat16:
      return "float16";
    case kBFloat16:
      return "bfloat16";
    case kFloat32:
      return "float32";
    case kFloat64:
      return "float64";
    case kComplex64:
      return "complex64";
    case kComplex128:
      return "complex128";
    case kFloat8_e4m3fn:
      return "float8_e4m3fn";
    case kFloat8_e5m2:
      return "float8_e5m2";
  }
  return "unknown";
}

ScalarType parse_scalar_type(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, ScalarType>, 30> kAliases{{
      {"u8", kUInt8},
      {"byte", kUInt8},
      {"i8", kInt8},
      {"char", kInt8},
      {"i16", kInt16},
      {"short", kInt16},
      {"i32", kInt32},
      {"int", kInt32},
      {"i64", kInt64},
      {"long", kInt64},
      {"f16", kFloat16},
      {"half", kFloat16},
      {"bf16", kBFloat16},
      {"f32", kFloat32},
      {"float", kFloat32},
      {"f64", kFloat64},
      {"double", kFloat64},
      {"c64", kComplex64},
      {"cfloat", kComplex64},
      {"complex", kComplex64},
      {"c128", kComplex128},
      {"cdouble", kComplex128},
      {"e4m3", kFloat8_e4m3fn},
      {"fp8_e4m3fn", kFloat8_e4m3fn},
      {"f8e4m3", kFloat8_e4m3fn},
      {"e5m2", kFloat8_e5m2},
      {"fp8_e5m2", kFloat8_e5m2},
      {"f8e5m2", kFloat8_e5m2},
      {"b", kBool},
      {"u1", kBool},
  }};
  std::string_view bare = name;
  if (bare.starts_with("ferry.")) bare.remove_prefix(6);
  if (bare.starts_with("torch.")) bare.remove_prefix(6);
  for (int i = 0; i < kNumScalarTypes; ++i) {
    const auto t = static_cast<ScalarType>(i);
    if (bare == scalar_type_name(t) || bare == dtype_name(t)) return t;
  }
  for (const auto& [alias, t] : kAliases) {
    if (bare == alias) return t;
  }
  FERRY_FAIL_AS(DTypeError, "expected a dtype name such as \"float32\", \"bf16\" or \"int64\", ",
                "but got \"", name, "\"");
}

std::ostream& operator<<(std::ostream& out, ScalarType t) { return out << scalar_type_name(t); }

}  // namespace ferry
