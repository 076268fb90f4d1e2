// numpy interop: t.numpy() (zero-copy, CPU tensors), np.asarray(t), ferry.from_numpy(a)
// (zero-copy, the array stays alive while a tensor uses it), and ferry.tensor(data)'s copy of
// lists, scalars and arrays with torch's default dtypes. numpy is imported on first use.
#include <pybind11/numpy.h>

#include <cstring>
#include <string>
#include <vector>

#include "bindings.h"
#include "ferry/core/error.h"
#include "ferry/ops/factories.h"

namespace ferry::python {
namespace {

bool has_numpy_dtype(ScalarType t) {
  return t != kBFloat16 && t != kFloat8_e4m3fn && t != kFloat8_e5m2;
}

py::dtype numpy_dtype(ScalarType t) {
  if (!has_numpy_dtype(t)) {
    throw py::type_error("numpy has no " + std::string(dtype_name(t)) +
                         " dtype; convert first, e.g. t.to(ferry.float32).numpy()");
  }
  return py::dtype(std::string(dtype_name(t)));
}

ScalarType dtype_of_array(const py::array& a) {
  const std::string name = py::str(a.dtype().attr("name"));
  try {
    return *dtype_from_python(py::str(name));
  } catch (const DTypeError&) {
    throw py::type_error("ferry has no dtype for numpy's " + name);
  }
}

// A CPU tensor over the array's memory; the tensor holds a reference to the array.
Tensor tensor_over_array(const py::array& a) {
  const ScalarType dtype = dtype_of_array(a);
  DimVector sizes, strides;
  const auto item = static_cast<ssize_t>(a.itemsize());
  for (ssize_t d = 0; d < a.ndim(); ++d) {
    sizes.push_back(a.shape(d));
    if (a.strides(d) < 0 || a.strides(d) % item != 0) {
      throw py::value_error(
          "from_numpy: ferry needs non-negative strides that are multiples of the item size, "
          "but the array has strides " +
          std::string(py::str(a.attr("strides"))));
    }
    strides.push_back(a.strides(d) / item);
  }
  auto* owner = new py::object(a);
  return from_blob(
      const_cast<void*>(a.data()), sizes, strides,
      [owner](void*) {
        if (!Py_IsInitialized()) return;  // the interpreter is gone: leak rather than crash
        py::gil_scoped_acquire gil;
        delete owner;
      },
      TensorOptions(dtype));
}

py::array to_numpy(const Tensor& t) {
  if (!t.is_cpu()) {
    throw py::type_error("numpy(): the tensor is on " + t.device().str() +
                         "; copy it to the host first with t.cpu()");
  }
  if (t.is_conj() || t.is_neg()) {
    throw py::value_error(
        "numpy(): the tensor has a lazy conj or neg bit; call resolve_conj() "
        "or resolve_neg() first");
  }
  const py::dtype dt = numpy_dtype(t.dtype());
  std::vector<ssize_t> shape, strides;
  for (int64_t d = 0; d < t.dim(); ++d) {
    shape.push_back(t.size(d));
    strides.push_back(t.stride(d) * static_cast<ssize_t>(t.element_size()));
  }
  // The capsule keeps the storage alive for as long as numpy uses the memory.
  py::capsule owner(new Tensor(t), [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(dt, shape, strides, t.data_ptr(), owner);
}

}  // namespace

Tensor tensor_from_data(py::handle data, std::optional<ScalarType> dtype) {
  Tensor host;
  if (py::isinstance<Tensor>(data)) {
    const Tensor src = data.cast<Tensor>();
    py::gil_scoped_release release;
    host = src.to(TensorOptions().device(Device(DeviceType::CPU)), false, /*copy=*/true);
  } else {
    py::module_ np = py::module_::import("numpy");
    const bool is_array = py::isinstance<py::array>(data);
    py::array a = np.attr("asarray")(data);
    bool strides_ok = true;
    for (ssize_t d = 0; d < a.ndim(); ++d) {
      strides_ok = strides_ok && a.strides(d) >= 0 && a.strides(d) % a.itemsize() == 0;
    }
    if (!strides_ok) a = np.attr("ascontiguousarray")(a);  // a reversed view, say
    if (!is_array && !dtype) {
      // torch's defaults for Python numbers: float32 and complex64, not numpy's 64-bit ones.
      const std::string kind = py::str(a.dtype().attr("kind"));
      if (kind == "f") a = a.attr("astype")("float32");
      if (kind == "c") a = a.attr("astype")("complex64");
    }
    const std::string kind = py::str(a.dtype().attr("kind"));
    if (kind == "O" || kind == "U" || kind == "S") {
      throw py::type_error("tensor(): expected numbers, but got data numpy reads as " +
                           std::string(py::str(a.dtype())));
    }
    Tensor view = tensor_over_array(a);
    {
      py::gil_scoped_release release;
      host = view.clone(MemoryFormat::Contiguous);
      view = Tensor();  // drops the array's reference (its deleter takes the GIL back)
    }
  }
  if (dtype && *dtype != host.dtype()) {
    py::gil_scoped_release release;
    host = host.to(*dtype);
  }
  return host;
}

void bind_numpy(py::module_& m, py::class_<Tensor>& tensor) {
  tensor.def("numpy", &to_numpy,
             "A numpy array sharing this CPU tensor's memory (writes show through both ways).");
  tensor.def(
      "__array__",
      [](const Tensor& t, py::object dtype) {
        Tensor host = t;
        if (!t.is_cpu()) {
          py::gil_scoped_release release;
          host = t.cpu();
        }
        py::array a = to_numpy(host);
        return dtype.is_none() ? py::object(a) : a.attr("astype")(dtype);
      },
      py::arg("dtype") = py::none());
  m.def(
      "from_numpy", [](const py::array& a) { return tensor_over_array(a); }, py::arg("array"),
      "A CPU tensor sharing the array's memory; the array stays alive while the tensor does.");
}

}  // namespace ferry::python
