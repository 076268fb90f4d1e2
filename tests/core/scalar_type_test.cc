// ScalarType names, sizes, predicates, parsing, and the C++ type mapping.
#include <gtest/gtest.h>

#include "ferry/core/scalar_type.h"

namespace ferry {
namespace {

TEST(ScalarType, SizesAndNames) {
  struct Row {
    ScalarType t;
    size_t size;
    const char* name;
    const char* dtype;
  };
  const Row rows[] = {
      {kBool, 1, "Bool", "bool"},
      {kUInt8, 1, "UInt8", "uint8"},
      {kInt8, 1, "Int8", "int8"},
      {kInt16, 2, "Int16", "int16"},
      {kInt32, 4, "Int32", "int32"},
      {kInt64, 8, "Int64", "int64"},
      {kFloat16, 2, "Float16", "float16"},
      {kBFloat16, 2, "BFloat16", "bfloat16"},
      {kFloat32, 4, "Float32", "float32"},
      {kFloat64, 8, "Float64", "float64"},
      {kComplex64, 8, "Complex64", "complex64"},
      {kComplex128, 16, "Complex128", "complex128"},
      {kFloat8_e4m3fn, 1, "Float8_e4m3fn", "float8_e4m3fn"},
      {kFloat8_e5m2, 1, "Float8_e5m2", "float8_e5m2"},
  };
  ASSERT_EQ(std::size(rows), static_cast<size_t>(kNumScalarTypes));
  for (const Row& r : rows) {
    EXPECT_EQ(element_size(r.t), r.size) << r.name;
    EXPECT_EQ(scalar_type_name(r.t), r.name);
    EXPECT_EQ(dtype_name(r.t), r.dtype);
    EXPECT_EQ(parse_scalar_type(r.name), r.t);
    EXPECT_EQ(parse_scalar_type(r.dtype), r.t);
    EXPECT_EQ(parse_scalar_type(std::string("torch.") + r.dtype), r.t);
  }
}

// The enumerator names a PyTorch user types from memory (c10::ScalarType::Float ...).
TEST(ScalarType, PyTorchEnumeratorNames) {
  static_assert(ScalarType::Byte == ScalarType::UInt8);
  static_assert(ScalarType::Char == ScalarType::Int8);
  static_assert(ScalarType::Short == ScalarType::Int16);
  static_assert(ScalarType::Int == ScalarType::Int32);
  static_assert(ScalarType::Long == ScalarType::Int64);
  static_assert(ScalarType::Half == ScalarType::Float16);
  static_assert(ScalarType::Float == ScalarType::Float32);
  static_assert(ScalarType::Double == ScalarType::Float64);
  static_assert(ScalarType::ComplexFloat == ScalarType::Complex64);
  static_assert(ScalarType::ComplexDouble == ScalarType::Complex128);
  EXPECT_EQ(scalar_type_name(ScalarType::Float), "Float32");
  EXPECT_EQ(element_size(ScalarType::Long), 8u);
}

TEST(ScalarType, Aliases) {
  EXPECT_EQ(kFloat, kFloat32);
  EXPECT_EQ(kHalf, kFloat16);
  EXPECT_EQ(kDouble, kFloat64);
  EXPECT_EQ(kLong, kInt64);
  EXPECT_EQ(kInt, kInt32);
  EXPECT_EQ(parse_scalar_type("bf16"), kBFloat16);
  EXPECT_EQ(parse_scalar_type("f16"), kHalf);
  EXPECT_EQ(parse_scalar_type("half"), kHalf);
  EXPECT_EQ(parse_scalar_type("e4m3"), kFloat8_e4m3fn);
  EXPECT_EQ(parse_scalar_type("c128"), kComplex128);
  try {
    parse_scalar_type("float33");
    FAIL() << "expected an error";
  } catch (const DTypeError& e) {
    EXPECT_NE(std::string(e.what()).find("\"float33\""), std::string::npos) << e.what();
  }
}

TEST(ScalarType, Predicates) {
  for (int i = 0; i < kNumScalarTypes; ++i) {
    const auto t = static_cast<ScalarType>(i);
    const int kinds = is_complex(t) + is_floating_point(t) + is_integral(t, true);
    EXPECT_EQ(kinds, 1) << t;
  }
  EXPECT_TRUE(is_floating_point(kFloat8_e5m2));
  EXPECT_TRUE(is_reduced_floating_point(kBFloat16));
  EXPECT_FALSE(is_reduced_floating_point(kFloat));
  EXPECT_FALSE(is_integral(kBool));
  EXPECT_TRUE(is_integral(kBool, true));
  EXPECT_EQ(to_real_value_type(kComplex64), kFloat);
  EXPECT_EQ(to_real_value_type(kComplex128), kDouble);
}

TEST(ScalarType, VisitMapsToCppTypes) {
  for (int i = 0; i < kNumScalarTypes; ++i) {
    const auto t = static_cast<ScalarType>(i);
    const ScalarType back = visit_dtype(t, []<typename T>() { return scalar_type_v<T>; });
    EXPECT_EQ(back, t);
    const size_t size = visit_dtype(t, []<typename T>() { return sizeof(T); });
    EXPECT_EQ(size, element_size(t));
  }
  static_assert(std::is_same_v<cpp_type_t<kBFloat16>, BFloat16>);
  static_assert(scalar_type_v<std::complex<double>> == kComplex128);
}

}  // namespace
}  // namespace ferry
