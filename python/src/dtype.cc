// ferry.dtype: one Python object per ScalarType (ferry.float32, ferry.bfloat16, ...), with
// PyTorch's aliases (ferry.float, ferry.long, ferry.half ...), and the parsing that lets every
// function taking a dtype accept strings and torch's and numpy's dtypes as well.
#include <array>
#include <string>
#include <string_view>

#include "bindings.h"
#include "ferry/core/error.h"

namespace ferry::python {
namespace {

// Strong references, never released: dtype objects live as long as the process.
std::array<PyObject*, kNumScalarTypes>& objects() {
  static std::array<PyObject*, kNumScalarTypes> table{};
  return table;
}

std::optional<ScalarType> from_name(std::string_view name) {
  constexpr std::string_view kTorch = "torch.";
  if (name.substr(0, kTorch.size()) == kTorch) name.remove_prefix(kTorch.size());
  if (name.size() > 1 && name.back() == '_') name.remove_suffix(1);  // numpy's bool_
  return parse_scalar_type(name);
}

std::string type_module(py::handle type) {
  return py::str(type.attr("__module__")).cast<std::string>();
}

}  // namespace

py::object dtype_object(ScalarType type) {
  return py::reinterpret_borrow<py::object>(objects()[static_cast<size_t>(type)]);
}

std::optional<ScalarType> dtype_from_python(py::handle src) {
  const auto& table = objects();
  for (size_t i = 0; i < table.size(); ++i) {
    if (src.ptr() == table[i]) return static_cast<ScalarType>(i);
  }
  if (src.is_none()) return std::nullopt;
  if (PyUnicode_Check(src.ptr())) return from_name(src.cast<std::string>());
  if (PyType_Check(src.ptr())) {
    if (src.ptr() == reinterpret_cast<PyObject*>(&PyFloat_Type)) return kFloat64;
    if (src.ptr() == reinterpret_cast<PyObject*>(&PyBool_Type)) return kBool;
    if (src.ptr() == reinterpret_cast<PyObject*>(&PyLong_Type)) return kInt64;
    if (src.ptr() == reinterpret_cast<PyObject*>(&PyComplex_Type)) return kComplex128;
    if (type_module(src) == "numpy") {  // numpy.float32, numpy.bool_ ...
      return from_name(py::str(src.attr("__name__")).cast<std::string>());
    }
    return std::nullopt;
  }
  const py::handle type = py::type::handle_of(src);
  const std::string module = type_module(type);
  if (module == "torch") return from_name(py::str(src).cast<std::string>());  // torch.dtype
  if (module == "numpy" && py::hasattr(src, "kind")) {                        // numpy.dtype
    return from_name(py::str(src.attr("name")).cast<std::string>());
  }
  return std::nullopt;
}

void bind_dtype(py::module_& m) {
  py::class_<DType> cls(m, "dtype", "A tensor element type: ferry.float32, ferry.bfloat16, ...");
  cls.def_property_readonly("itemsize", [](const DType& d) { return element_size(d.type); })
      .def_property_readonly("is_floating_point",
                             [](const DType& d) { return is_floating_point(d.type); })
      .def_property_readonly("is_complex", [](const DType& d) { return is_complex(d.type); })
      .def_property_readonly("is_signed",
                             [](const DType& d) { return d.type != kBool && d.type != kUInt8; })
      .def("__repr__", [](const DType& d) { return "ferry." + std::string(dtype_name(d.type)); })
      .def("__reduce__", [](const DType& d) {
        return py::make_tuple(
            py::module_::import("builtins").attr("getattr"),
            py::make_tuple(py::module_::import("ferry"), std::string(dtype_name(d.type))));
      });
  auto& table = objects();
  for (int i = 0; i < kNumScalarTypes; ++i) {
    const auto t = static_cast<ScalarType>(i);
    py::object obj = py::cast(DType{t});
    table[static_cast<size_t>(i)] = obj.inc_ref().ptr();
    m.attr(std::string(dtype_name(t)).c_str()) = obj;
  }
  // PyTorch's aliases.
  const std::pair<const char*, ScalarType> aliases[] = {
      {"float", kFloat32}, {"double", kFloat64}, {"half", kFloat16},     {"long", kInt64},
      {"int", kInt32},     {"short", kInt16},    {"cfloat", kComplex64}, {"cdouble", kComplex128},
  };
  for (const auto& [name, t] : aliases) m.attr(name) = dtype_object(t);
}

}  // namespace ferry::python
