// IValue: one boxed argument or result of an operator, and Stack, the vector boxed kernels work
// on (arguments pushed in order; a kernel pops them and pushes its results), as in c10.
// An IValue holds exactly one of the types ferry's operator schemas use; reading it as another
// type raises ferry::Error naming both (ints and bools widen to Scalar, ints to float).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ferry/core/array_ref.h"
#include "ferry/core/device.h"
#include "ferry/core/memory_format.h"
#include "ferry/core/scalar.h"
#include "ferry/core/scalar_type.h"
#include "ferry/core/tensor.h"

namespace ferry {

class IValue {
 public:
  // In the order of the variant below.
  enum class Tag : uint8_t {
    None,
    Tensor,
    Int,
    Double,
    Bool,
    Scalar,
    ScalarType,
    Device,
    MemoryFormat,
    IntList,
    TensorList,
    String,
  };

  IValue() = default;
  IValue(std::nullopt_t) {}                             // NOLINT
  IValue(Tensor t) : v_(std::move(t)) {}                // NOLINT
  IValue(bool b) : v_(b) {}                             // NOLINT
  IValue(double d) : v_(d) {}                           // NOLINT
  IValue(Scalar s) : v_(s) {}                           // NOLINT
  IValue(ScalarType t) : v_(t) {}                       // NOLINT
  IValue(Device d) : v_(d) {}                           // NOLINT
  IValue(MemoryFormat f) : v_(f) {}                     // NOLINT
  IValue(std::vector<int64_t> v) : v_(std::move(v)) {}  // NOLINT
  IValue(IntArrayRef v) : v_(v.vec()) {}                // NOLINT
  IValue(std::vector<Tensor> v) : v_(std::move(v)) {}   // NOLINT
  IValue(ArrayRef<Tensor> v) : v_(v.vec()) {}           // NOLINT
  IValue(std::string s) : v_(std::move(s)) {}           // NOLINT
  IValue(std::string_view s) : v_(std::string(s)) {}    // NOLINT
  template <typename T,
            std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  IValue(T i) : v_(static_cast<int64_t>(i)) {}  // NOLINT
  template <typename T>
  IValue(std::optional<T> v) {  // NOLINT
    if (v.has_value()) *this = IValue(std::move(*v));
  }
  // A string literal would otherwise become a bool.
  IValue(const char* s) : v_(std::string(s)) {}  // NOLINT

  Tag tag() const { return static_cast<Tag>(v_.index()); }
  // "Tensor", "int", "float", "bool", ...: the schema's name for the held type ("None" when none).
  std::string_view type_name() const;

  bool is_none() const { return tag() == Tag::None; }
  bool is_tensor() const { return tag() == Tag::Tensor; }
  bool is_int() const { return tag() == Tag::Int; }
  bool is_double() const { return tag() == Tag::Double; }
  bool is_bool() const { return tag() == Tag::Bool; }
  bool is_scalar() const { return tag() == Tag::Scalar; }
  bool is_scalar_type() const { return tag() == Tag::ScalarType; }
  bool is_device() const { return tag() == Tag::Device; }
  bool is_memory_format() const { return tag() == Tag::MemoryFormat; }
  bool is_int_list() const { return tag() == Tag::IntList; }
  bool is_tensor_list() const { return tag() == Tag::TensorList; }

  const Tensor& to_tensor() const { return get<Tensor>(Tag::Tensor); }
  // The held tensor itself, so that a kernel's Tensor& parameter refers to the stack's copy.
  Tensor& to_tensor_ref() { return get_mut<Tensor>(Tag::Tensor); }
  int64_t to_int() const { return get<int64_t>(Tag::Int); }
  double to_double() const;  // accepts Int too
  bool to_bool() const { return get<bool>(Tag::Bool); }
  Scalar to_scalar() const;  // accepts Int, Double and Bool too
  ScalarType to_scalar_type() const { return get<ScalarType>(Tag::ScalarType); }
  Device to_device() const { return get<Device>(Tag::Device); }
  MemoryFormat to_memory_format() const { return get<MemoryFormat>(Tag::MemoryFormat); }
  const std::vector<int64_t>& to_int_list() const {
    return get<std::vector<int64_t>>(Tag::IntList);
  }
  const std::vector<Tensor>& to_tensor_list() const {
    return get<std::vector<Tensor>>(Tag::TensorList);
  }
  bool is_string() const { return tag() == Tag::String; }
  const std::string& to_string() const { return get<std::string>(Tag::String); }

  // Same type and equal value; tensors compare by identity (Tensor::is_same).
  friend bool operator==(const IValue& a, const IValue& b);

 private:
  template <typename T>
  const T& get(Tag want) const {
    if (tag() != want) wrong_type(want);
    return *std::get_if<T>(&v_);
  }
  template <typename T>
  T& get_mut(Tag want) {
    if (tag() != want) wrong_type(want);
    return *std::get_if<T>(&v_);
  }
  [[noreturn]] void wrong_type(Tag want) const;

  std::variant<std::monostate, Tensor, int64_t, double, bool, Scalar, ScalarType, Device,
               MemoryFormat, std::vector<int64_t>, std::vector<Tensor>, std::string>
      v_;
};

// The schema type name of a tag ("Tensor", "int", "float", ...).
std::string_view ivalue_type_name(IValue::Tag tag);

// Prints values as a schema would write them; tensors as "Tensor[2, 3] float32 cpu" (printing
// their elements could need a device copy, and traces should never do that).
std::ostream& operator<<(std::ostream& out, const IValue& v);

using Stack = std::vector<IValue>;

}  // namespace ferry
