// Tensor factories with torch's Python signatures: ferry.empty(2, 3, dtype=, device=),
// zeros/ones/full/arange/rand/randn/randint, the *_like forms and ferry.tensor(data). Sizes come
// as separate integers or one sequence; allocations and fills run with the GIL released.
#include <optional>
#include <string>

#include "bindings.h"
#include "ferry/core/error.h"
#include "ferry/ops/factories.h"

namespace ferry::python {
namespace {

TensorOptions make_options(std::optional<ScalarType> dtype, std::optional<Device> device,
                           bool pin_memory, std::optional<MemoryFormat> format = std::nullopt) {
  TensorOptions o;
  if (dtype) o = o.dtype(*dtype);
  if (device) o = o.device(*device);
  if (format) o = o.memory_format(*format);
  return o.pinned_memory(pin_memory);
}

// The keyword arguments every factory takes, after its positional ones.
#define FERRY_FACTORY_KWARGS \
  py::arg("dtype") = py::none(), py::arg("device") = py::none(), py::arg("pin_memory") = false
#define FERRY_FACTORY_PARAMS \
  std::optional<ScalarType> dtype, std::optional<Device> device, bool pin_memory

}  // namespace

Scalar scalar_from_python(py::handle v) {
  PyObject* p = v.ptr();
  if (PyBool_Check(p)) return Scalar(p == Py_True);
  if (PyLong_Check(p)) return Scalar(v.cast<int64_t>());
  if (PyFloat_Check(p)) return Scalar(PyFloat_AS_DOUBLE(p));
  if (PyComplex_Check(p)) {
    return Scalar(std::complex<double>(PyComplex_RealAsDouble(p), PyComplex_ImagAsDouble(p)));
  }
  const std::string type = py::str(py::type::handle_of(v).attr("__name__"));
  if (type == "bool_") return Scalar(v.attr("__bool__")().cast<bool>());  // numpy.bool_
  if (PyIndex_Check(p)) return Scalar(v.cast<int64_t>());
  if (py::hasattr(v, "__complex__") && !py::hasattr(v, "__float__")) {
    const auto c = v.attr("__complex__")().cast<std::complex<double>>();
    return Scalar(c);
  }
  if (py::hasattr(v, "__float__")) return Scalar(v.attr("__float__")().cast<double>());
  throw py::type_error("expected a number (bool, int, float or complex), but got " + type);
}

DimVector sizes_from_args(const py::args& args, const char* what) {
  DimVector out;
  py::handle source = args;
  if (args.size() == 1 && (PyTuple_Check(args[0].ptr()) || PyList_Check(args[0].ptr()))) {
    source = args[0];
  }
  for (py::handle item : source) {
    if (!PyIndex_Check(item.ptr()) || PyBool_Check(item.ptr())) {
      throw py::type_error(std::string(what) + "(): expected integers, but got " +
                           std::string(py::str(py::type::handle_of(item).attr("__name__"))));
    }
    out.push_back(item.cast<int64_t>());
  }
  return out;
}

void bind_factories(py::module_& m) {
  m.def(
      "empty",
      [](const py::args& size, FERRY_FACTORY_PARAMS, std::optional<MemoryFormat> memory_format) {
        const DimVector sizes = sizes_from_args(size, "empty");
        const TensorOptions o = make_options(dtype, device, pin_memory, memory_format);
        py::gil_scoped_release release;
        return empty(sizes, o);
      },
      FERRY_FACTORY_KWARGS, py::arg("memory_format") = py::none(),
      "Uninitialized memory: ferry.empty(2, 3, dtype=ferry.float16, device='sim:0').");
  m.def(
      "empty_strided",
      [](std::vector<int64_t> size, std::vector<int64_t> stride, FERRY_FACTORY_PARAMS) {
        const TensorOptions o = make_options(dtype, device, pin_memory);
        py::gil_scoped_release release;
        return empty_strided(size, stride, o);
      },
      py::arg("size"), py::arg("stride"), py::kw_only(), FERRY_FACTORY_KWARGS);
  m.def(
      "zeros",
      [](const py::args& size, FERRY_FACTORY_PARAMS) {
        const DimVector sizes = sizes_from_args(size, "zeros");
        const TensorOptions o = make_options(dtype, device, pin_memory);
        py::gil_scoped_release release;
        return zeros(sizes, o);
      },
      FERRY_FACTORY_KWARGS);
  m.def(
      "ones",
      [](const py::args& size, FERRY_FACTORY_PARAMS) {
        const DimVector sizes = sizes_from_args(size, "ones");
        const TensorOptions o = make_options(dtype, device, pin_memory);
        py::gil_scoped_release release;
        return ones(sizes, o);
      },
      FERRY_FACTORY_KWARGS);
  m.def(
      "full",
      [](std::vector<int64_t> size, py::handle value, FERRY_FACTORY_PARAMS) {
        const Scalar v = scalar_from_python(value);
        const TensorOptions o = make_options(dtype, device, pin_memory);
        py::gil_scoped_release release;
        return full(size, v, o);
      },
      py::arg("size"), py::arg("fill_value"), py::kw_only(), FERRY_FACTORY_KWARGS);
  m.def(
      "arange",
      [](py::handle a, py::handle b, py::handle step, FERRY_FACTORY_PARAMS) {
        const TensorOptions o = make_options(dtype, device, pin_memory);
        const Scalar s = scalar_from_python(step);
        if (b.is_none()) {
          const Scalar end = scalar_from_python(a);
          py::gil_scoped_release release;
          return arange(Scalar(int64_t{0}), end, s, o);
        }
        const Scalar start = scalar_from_python(a);
        const Scalar end = scalar_from_python(b);
        py::gil_scoped_release release;
        return arange(start, end, s, o);
      },
      py::arg("start"), py::arg("end") = py::none(), py::arg("step") = 1, py::kw_only(),
      FERRY_FACTORY_KWARGS, "[start, end) by step, as torch.arange (arange(end) starts at 0).");
  m.def(
      "rand",
      [](const py::args& size, FERRY_FACTORY_PARAMS) {
        const DimVector sizes = sizes_from_args(size, "rand");
        const TensorOptions o = make_options(dtype, device, pin_memory);
        py::gil_scoped_release release;
        return rand(sizes, o);
      },
      FERRY_FACTORY_KWARGS, "Uniform in [0, 1), from ferry's seeded generator (manual_seed).");
  m.def(
      "randn",
      [](const py::args& size, FERRY_FACTORY_PARAMS) {
        const DimVector sizes = sizes_from_args(size, "randn");
        const TensorOptions o = make_options(dtype, device, pin_memory);
        py::gil_scoped_release release;
        return randn(sizes, o);
      },
      FERRY_FACTORY_KWARGS);
  m.def(
      "randint",
      [](const py::args& args, FERRY_FACTORY_PARAMS) {
        if (args.size() != 2 && args.size() != 3) {
          throw py::type_error("randint(): expected (high, size) or (low, high, size)");
        }
        const bool has_low = args.size() == 3;
        const int64_t low = has_low ? args[0].cast<int64_t>() : 0;
        const int64_t high = args[has_low ? 1 : 0].cast<int64_t>();
        const DimVector sizes =
            sizes_from_args(py::args(py::make_tuple(args[has_low ? 2 : 1])), "randint");
        const TensorOptions o = make_options(dtype, device, pin_memory);
        py::gil_scoped_release release;
        return randint(low, high, sizes, o);
      },
      FERRY_FACTORY_KWARGS);
  m.def(
      "empty_like",
      [](const Tensor& like, FERRY_FACTORY_PARAMS, std::optional<MemoryFormat> memory_format) {
        const TensorOptions o = make_options(dtype, device, pin_memory);
        py::gil_scoped_release release;
        return empty_like(like, o, memory_format);
      },
      py::arg("input"), py::kw_only(), FERRY_FACTORY_KWARGS, py::arg("memory_format") = py::none());
  m.def(
      "zeros_like",
      [](const Tensor& like, FERRY_FACTORY_PARAMS) {
        const TensorOptions o = make_options(dtype, device, pin_memory);
        py::gil_scoped_release release;
        return zeros_like(like, o);
      },
      py::arg("input"), py::kw_only(), FERRY_FACTORY_KWARGS);
  m.def(
      "ones_like",
      [](const Tensor& like, FERRY_FACTORY_PARAMS) {
        const TensorOptions o = make_options(dtype, device, pin_memory);
        py::gil_scoped_release release;
        return ones_like(like, o);
      },
      py::arg("input"), py::kw_only(), FERRY_FACTORY_KWARGS);
  m.def(
      "tensor",
      [](py::handle data, FERRY_FACTORY_PARAMS) {
        Tensor host = tensor_from_data(data, dtype);
        const TensorOptions o = make_options(dtype, device, pin_memory);
        py::gil_scoped_release release;
        if (!device && !pin_memory) return host;
        return host.to(o.device(device.value_or(Device(DeviceType::CPU))), false, false);
      },
      py::arg("data"), py::kw_only(), FERRY_FACTORY_KWARGS,
      "A new tensor holding a copy of `data` (a number, nested lists, a numpy array, or a "
      "ferry or other DLPack tensor).");
}

}  // namespace ferry::python
