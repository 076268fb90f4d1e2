// IValue: type names, checked reads and printing.
#include "ferry/dispatch/ivalue.h"

#include <algorithm>
#include <ostream>

#include "ferry/core/error.h"

namespace ferry {

std::string_view ivalue_type_name(IValue::Tag tag) {
  switch (tag) {
    case IValue::Tag::None:
      return "None";
    case IValue::Tag::Tensor:
      return "Tensor";
    case IValue::Tag::Int:
      return "int";
    case IValue::Tag::Double:
      return "float";
    case IValue::Tag::Bool:
      return "bool";
    case IValue::Tag::Scalar:
      return "Scalar";
    case IValue::Tag::ScalarType:
      return "ScalarType";
    case IValue::Tag::Device:
      return "Device";
    case IValue::Tag::MemoryFormat:
      return "MemoryFormat";
    case IValue::Tag::IntList:
      return "int[]";
    case IValue::Tag::TensorList:
      return "Tensor[]";
    case IValue::Tag::String:
      return "str";
  }
  return "unknown";
}

std::string_view IValue::type_name() const { return ivalue_type_name(tag()); }

void IValue::wrong_type(Tag want) const {
  FERRY_FAIL_AS(Error, "expected an IValue holding ", ivalue_type_name(want), ", but it holds ",
                type_name(), " (", *this, ")");
}

double IValue::to_double() const {
  if (is_int()) return static_cast<double>(to_int());
  return get<double>(Tag::Double);
}

Scalar IValue::to_scalar() const {
  switch (tag()) {
    case Tag::Int:
      return Scalar(to_int());
    case Tag::Double:
      return Scalar(*std::get_if<double>(&v_));
    case Tag::Bool:
      return Scalar(to_bool());
    default:
      return get<Scalar>(Tag::Scalar);
  }
}

bool operator==(const IValue& a, const IValue& b) {
  if (a.tag() != b.tag()) return false;
  return std::visit(
      [&](const auto& x) -> bool {
        using T = std::decay_t<decltype(x)>;
        const T& y = *std::get_if<T>(&b.v_);
        if constexpr (std::is_same_v<T, std::monostate>) {
          return true;
        } else if constexpr (std::is_same_v<T, Tensor>) {
          return x.is_same(y);
        } else if constexpr (std::is_same_v<T, std::vector<Tensor>>) {
          return std::equal(x.begin(), x.end(), y.begin(), y.end(),
                            [](const Tensor& p, const Tensor& q) { return p.is_same(q); });
        } else if constexpr (std::is_same_v<T, Scalar>) {
          if (x.kind() != y.kind()) return false;
          switch (x.kind()) {
            case Scalar::Kind::Double:
              return x.template to<double>() == y.template to<double>();
            case Scalar::Kind::Complex:
              return x.template to<std::complex<double>>() == y.template to<std::complex<double>>();
            default:
              return x.template to<int64_t>() == y.template to<int64_t>();
          }
        } else {
          return x == y;
        }
      },
      a.v_);
}

std::ostream& operator<<(std::ostream& out, const IValue& v) {
  switch (v.tag()) {
    case IValue::Tag::None:
      return out << "None";
    case IValue::Tag::Tensor: {
      const Tensor& t = v.to_tensor();
      if (!t.defined()) return out << "Tensor(undefined)";
      return out << "Tensor" << t.sizes() << " " << dtype_name(t.dtype()) << " " << t.device();
    }
    case IValue::Tag::Int:
      return out << v.to_int();
    case IValue::Tag::Double:
      return out << v.to_double();
    case IValue::Tag::Bool:
      return out << (v.to_bool() ? "True" : "False");
    case IValue::Tag::Scalar:
      return out << v.to_scalar();
    case IValue::Tag::ScalarType:
      return out << dtype_name(v.to_scalar_type());
    case IValue::Tag::Device:
      return out << v.to_device();
    case IValue::Tag::MemoryFormat:
      return out << v.to_memory_format();
    case IValue::Tag::IntList:
      return out << IntArrayRef(v.to_int_list());
    case IValue::Tag::TensorList:
      return out << "Tensor[" << v.to_tensor_list().size() << "]";
    case IValue::Tag::String:
      return out << '"' << v.to_string() << '"';
  }
  return out;
}

}  // namespace ferry
