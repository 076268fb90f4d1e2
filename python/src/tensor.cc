// ferry.Tensor: metadata, views and the operations that move bytes, with torch's Python names
// and argument forms (t.view(2, 3) or t.view((2, 3)); t.to("sim:0", ferry.bfloat16)). Views
// never copy. Everything that copies, converts or waits releases the GIL for the C++ call.
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "ferry/core/error.h"
#include "ferry/core/memory_format.h"
#include "ferry/device/stream.h"

namespace ferry::python {
namespace {

using Release = py::call_guard<py::gil_scoped_release>;

std::vector<int64_t> to_vector(IntArrayRef values) { return {values.begin(), values.end()}; }

py::object scalar_to_python(const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool:
      return py::bool_(s.to<bool>());
    case Scalar::Kind::Int:
      return py::int_(s.to<int64_t>());
    case Scalar::Kind::Double:
      return py::float_(s.to<double>());
    case Scalar::Kind::Complex: {
      const auto c = s.to<std::complex<double>>();
      return py::reinterpret_steal<py::object>(PyComplex_FromDoubles(c.real(), c.imag()));
    }
  }
  return py::none();
}

// The elements as nested lists (tolist): one copy to the host, then per-element reads.
py::object to_list(const Tensor& t) {
  if (t.dim() == 0) {
    Scalar s;
    {
      py::gil_scoped_release release;
      s = t.item();
    }
    return scalar_to_python(s);
  }
  Tensor host;
  {
    py::gil_scoped_release release;
    host = t.cpu();
  }
  py::list out;
  for (int64_t i = 0; i < host.size(0); ++i) out.append(to_list(host.select(0, i)));
  return out;
}

// Parses torch's to(...) forms: to(device), to(dtype), to(device, dtype), to(other), with the
// keywords device, dtype, non_blocking, copy, memory_format.
Tensor to_from_python(const Tensor& self, const py::args& args, const py::kwargs& kwargs) {
  std::optional<Device> device;
  std::optional<ScalarType> dtype;
  bool non_blocking = false;
  bool copy = false;
  std::optional<MemoryFormat> format;
  std::optional<Tensor> other;
  for (py::handle a : args) {
    if (py::isinstance<Tensor>(a)) {
      other = a.cast<Tensor>();
    } else if (PyUnicode_Check(a.ptr())) {
      // A string names a device unless it only parses as a dtype ("float32").
      try {
        device = Device(a.cast<std::string>());
      } catch (const DeviceError&) {
        dtype = dtype_from_python(a);
      }
    } else if (auto t = dtype_from_python(a)) {
      dtype = t;
    } else if (auto d = device_from_python(a)) {
      device = d;
    } else if (PyBool_Check(a.ptr())) {
      non_blocking = a.cast<bool>();  // to(device, dtype, non_blocking) positionally
    } else {
      throw py::type_error("to(): expected a device, a dtype or a tensor, but got " +
                           std::string(py::str(py::type::handle_of(a))));
    }
  }
  for (auto [key, value] : kwargs) {
    const std::string k = py::str(key);
    if (k == "device") {
      device = value.is_none() ? std::nullopt : device_from_python(value);
    } else if (k == "dtype") {
      dtype = value.is_none() ? std::nullopt : dtype_from_python(value);
    } else if (k == "non_blocking") {
      non_blocking = value.cast<bool>();
    } else if (k == "copy") {
      copy = value.cast<bool>();
    } else if (k == "memory_format") {
      format = value.cast<MemoryFormat>();
    } else {
      throw py::type_error("to(): unexpected keyword argument '" + k + "'");
    }
  }
  py::gil_scoped_release release;
  if (other) return self.to(*other, non_blocking, copy, format);
  TensorOptions options;
  if (device) options = options.device(*device);
  if (dtype) options = options.dtype(*dtype);
  return self.to(options, non_blocking, copy, format);
}

DimVector dims_from_args(const py::args& args) { return sizes_from_args(args, "dims"); }

// torch returns the tensor object itself when to(), contiguous() or cpu() change nothing.
py::object same_or_new(const py::object& self, Tensor result) {
  if (result.is_same(self.cast<const Tensor&>())) return self;
  return py::cast(std::move(result));
}

}  // namespace

void bind_tensor(py::module_& m) {
  py::enum_<MemoryFormat>(m, "memory_format")
      .value("contiguous_format", MemoryFormat::Contiguous)
      .value("channels_last", MemoryFormat::ChannelsLast)
      .value("channels_last_3d", MemoryFormat::ChannelsLast3d)
      .value("preserve_format", MemoryFormat::Preserve)
      .export_values();

  py::class_<Tensor> t(m, "Tensor", "A strided view of bytes on one device (see docs/python.md).");
  // ---- metadata ------------------------------------------------------------------------------
  t.def_property_readonly("shape",
                          [](const Tensor& s) { return py::tuple(py::cast(to_vector(s.sizes()))); })
      .def(
          "size",
          [](const Tensor& s, std::optional<int64_t> dim) -> py::object {
            if (dim) return py::int_(s.size(*dim));
            return py::tuple(py::cast(to_vector(s.sizes())));
          },
          py::arg("dim") = py::none())
      .def(
          "stride",
          [](const Tensor& s, std::optional<int64_t> dim) -> py::object {
            if (dim) return py::int_(s.stride(*dim));
            return py::tuple(py::cast(to_vector(s.strides())));
          },
          py::arg("dim") = py::none())
      .def("dim", &Tensor::dim)
      .def("ndimension", &Tensor::dim)
      .def_property_readonly("ndim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("device", &Tensor::device)
      .def_property_readonly("is_cpu", &Tensor::is_cpu)
      .def_property_readonly("is_sim", &Tensor::is_sim)
      .def_property_readonly("is_cuda", &Tensor::is_cuda)
      .def_property_readonly("requires_grad", &Tensor::requires_grad)
      .def("element_size", &Tensor::element_size)
      .def_property_readonly("itemsize", &Tensor::itemsize)
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def("storage_offset", &Tensor::storage_offset)
      .def("data_ptr", [](const Tensor& s) { return reinterpret_cast<uintptr_t>(s.data_ptr()); })
      .def("is_contiguous", &Tensor::is_contiguous,
           py::arg("memory_format") = MemoryFormat::Contiguous)
      .def("is_non_overlapping_and_dense", &Tensor::is_non_overlapping_and_dense)
      .def("is_conj", &Tensor::is_conj)
      .def("is_neg", &Tensor::is_neg)
      .def("is_complex", &Tensor::is_complex)
      .def("is_floating_point", &Tensor::is_floating_point)
      .def("is_pinned", &Tensor::is_pinned)
      .def("is_alias_of", &Tensor::is_alias_of, py::arg("other"))
      .def("__len__",
           [](const Tensor& s) {
             if (s.dim() == 0) throw py::type_error("len() of a 0-d tensor");
             return s.size(0);
           })
      .def("__repr__", &Tensor::str, Release())
      .def("__str__", &Tensor::str, Release());

  // ---- views ---------------------------------------------------------------------------------
  t.def("view",
        [](const Tensor& s, const py::args& a) { return s.view(sizes_from_args(a, "view")); })
      .def("reshape",
           [](const Tensor& s, const py::args& a) {
             const DimVector sizes = sizes_from_args(a, "reshape");
             py::gil_scoped_release release;  // may copy
             return s.reshape(sizes);
           })
      .def("permute",
           [](const Tensor& s, const py::args& a) { return s.permute(dims_from_args(a)); })
      .def("transpose", &Tensor::transpose, py::arg("dim0"), py::arg("dim1"))
      .def("t", &Tensor::t)
      .def_property_readonly("T",
                             [](const Tensor& s) {
                               DimVector dims;
                               for (int64_t d = s.dim() - 1; d >= 0; --d) dims.push_back(d);
                               return s.permute(dims);
                             })
      .def("narrow", &Tensor::narrow, py::arg("dim"), py::arg("start"), py::arg("length"))
      .def("select", &Tensor::select, py::arg("dim"), py::arg("index"))
      .def("expand", [](const Tensor& s,
                        const py::args& a) { return s.expand(sizes_from_args(a, "expand")); })
      .def("expand_as", &Tensor::expand_as, py::arg("other"))
      .def("unsqueeze", &Tensor::unsqueeze, py::arg("dim"))
      .def(
          "squeeze",
          [](const Tensor& s, std::optional<int64_t> dim) {
            return dim ? s.squeeze(*dim) : s.squeeze();
          },
          py::arg("dim") = py::none())
      .def("flatten", &Tensor::flatten, py::arg("start_dim") = 0, py::arg("end_dim") = -1)
      .def(
          "as_strided",
          [](const Tensor& s, std::vector<int64_t> size, std::vector<int64_t> stride,
             std::optional<int64_t> offset) { return s.as_strided(size, stride, offset); },
          py::arg("size"), py::arg("stride"), py::arg("storage_offset") = py::none())
      .def("conj", &Tensor::conj)
      .def("_neg_view", &Tensor::_neg_view)
      .def("alias", &Tensor::alias);

  // ---- operations that move bytes ------------------------------------------------------------
  t.def(
       "copy_",
       [](Tensor& self, const Tensor& src, bool non_blocking) -> Tensor& {
         return self.copy_(src, non_blocking);
       },
       py::arg("src"), py::arg("non_blocking") = false, Release(),
       py::return_value_policy::reference_internal)
      .def("to",
           [](const py::object& self, const py::args& args, const py::kwargs& kwargs) {
             return same_or_new(self, to_from_python(self.cast<const Tensor&>(), args, kwargs));
           })
      .def(
          "contiguous",
          [](const py::object& self, MemoryFormat format) {
            const auto& t = self.cast<const Tensor&>();
            Tensor out;
            {
              py::gil_scoped_release release;
              out = t.contiguous(format);
            }
            return same_or_new(self, std::move(out));
          },
          py::arg("memory_format") = MemoryFormat::Contiguous)
      .def("clone", &Tensor::clone, py::arg("memory_format") = MemoryFormat::Preserve, Release())
      .def("cpu",
           [](const py::object& self) {
             const auto& t = self.cast<const Tensor&>();
             Tensor out;
             {
               py::gil_scoped_release release;
               out = t.cpu();
             }
             return same_or_new(self, std::move(out));
           })
      .def(
          "fill_",
          [](Tensor& self, py::handle value) -> Tensor& {
            const Scalar s = scalar_from_python(value);
            py::gil_scoped_release release;
            return self.fill_(s);
          },
          py::arg("value"), py::return_value_policy::reference_internal)
      .def(
          "zero_", [](Tensor& self) -> Tensor& { return self.zero_(); }, Release(),
          py::return_value_policy::reference_internal)
      .def("resolve_conj", &Tensor::resolve_conj, Release())
      .def("resolve_neg", &Tensor::resolve_neg, Release())
      .def("pin_memory", &Tensor::pin_memory, Release())
      .def("record_stream", &Tensor::record_stream, py::arg("stream"))
      .def("item",
           [](const Tensor& s) {
             Scalar v;
             {
               py::gil_scoped_release release;
               v = s.item();
             }
             return scalar_to_python(v);
           })
      .def("tolist", &to_list)
      .def("__bool__",
           [](const Tensor& s) {
             if (s.numel() != 1) {
               throw py::value_error("the truth value of a tensor with " +
                                     std::to_string(s.numel()) + " elements is ambiguous");
             }
             py::gil_scoped_release release;
             return s.item().to<bool>();
           })
      .def("__float__",
           [](const Tensor& s) {
             py::gil_scoped_release release;
             return s.item().to<double>();
           })
      .def("__int__", [](const Tensor& s) {
        py::gil_scoped_release release;
        return s.item().to<int64_t>();
      });

  bind_indexing(t);
  bind_numpy(m, t);
  bind_dlpack(m, t);
  bind_ops(m, t);
  bind_autograd(m, t);
}

}  // namespace ferry::python
