// What the binding files of ferry._C share: one bind_<area>() per C++ area (each in its own .cc,
// called once by module.cc), and the conversions every area uses. dtypes and devices cross into
// Python as ferry.dtype / ferry.device objects; functions that take them also accept the
// strings ("float32", "sim:0") and torch's and numpy's spellings.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/core/scalar.h"
#include "ferry/core/scalar_type.h"
#include "ferry/core/small_vector.h"
#include "ferry/core/tensor.h"

namespace ferry::python {

namespace py = pybind11;

// Each adds one area's classes and functions to `m` (module.cc calls them in this order).
void bind_errors(py::module_& m);
void bind_dtype(py::module_& m);
void bind_device(py::module_& m);
void bind_stream(py::module_& m);
void bind_tensor(py::module_& m);
void bind_indexing(py::class_<Tensor>& tensor);
void bind_factories(py::module_& m);
void bind_numpy(py::module_& m, py::class_<Tensor>& tensor);
void bind_memory(py::module_& m);
void bind_dlpack(py::module_& m, py::class_<Tensor>& tensor);
void bind_ops(py::module_& m, py::class_<Tensor>& tensor);
void bind_autograd(py::module_& m, py::class_<Tensor>& tensor);
void bind_nn(py::module_& m);
void bind_pipeline(py::module_& m);  // also ferry.safetensors
void bind_switch(py::module_& m);

// The Python object standing for a dtype (one per dtype, so `t.dtype is ferry.float32`).
struct DType {
  ScalarType type;
};
// The Python object standing for a device (ferry.device).
struct PyDevice {
  Device device;
};

// dtype objects, device objects and their conversions (dtype.cc, device.cc).
py::object dtype_object(ScalarType type);
// ferry.dtype, "float32", torch.float32, numpy dtypes and scalar types, float/int/bool/complex.
// Raises DTypeError for a string ferry cannot parse; returns nullopt for anything else.
std::optional<ScalarType> dtype_from_python(py::handle src);
py::object device_object(Device device);
// ferry.device, "sim:0", torch.device; nullopt for anything else.
std::optional<Device> device_from_python(py::handle src);

// A Python bool, int, float or complex (or anything with __index__ / __float__ / __complex__) as
// a Scalar; raises TypeError naming the type otherwise.
Scalar scalar_from_python(py::handle value);
// torch's `int or tuple` arguments (kernel_size=3 or (3, 3)) as a list; ops.cc.
std::vector<int64_t> int_or_ints(py::handle value);
// Sizes given as f(2, 3), f((2, 3)) or f([2, 3]).
DimVector sizes_from_args(const py::args& args, const char* what);
// A CPU tensor holding `data` (a scalar, nested sequences, or anything numpy.asarray takes),
// with torch's default dtypes for Python scalars (float32, int64, complex64); numpy.cc.
Tensor tensor_from_data(py::handle data, std::optional<ScalarType> dtype);

}  // namespace ferry::python

// Argument and return conversions for ScalarType and Device.
namespace pybind11::detail {

template <>
struct type_caster<ferry::ScalarType> {
  PYBIND11_TYPE_CASTER(ferry::ScalarType, const_name("ferry.dtype"));
  bool load(handle src, bool /*convert*/) {
    auto t = ferry::python::dtype_from_python(src);
    if (t) value = *t;
    return t.has_value();
  }
  static handle cast(ferry::ScalarType t, return_value_policy, handle) {
    return ferry::python::dtype_object(t).release();
  }
};

template <>
struct type_caster<ferry::Device> {
  PYBIND11_TYPE_CASTER(ferry::Device, const_name("ferry.device"));
  bool load(handle src, bool /*convert*/) {
    auto d = ferry::python::device_from_python(src);
    if (d) value = *d;
    return d.has_value();
  }
  static handle cast(ferry::Device d, return_value_policy, handle) {
    return ferry::python::device_object(d).release();
  }
};

}  // namespace pybind11::detail
