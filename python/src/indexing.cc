// Basic indexing as numpy and torch do it: integers, slices (positive steps), None and Ellipsis,
// alone or in a tuple, give views; t[key] = value copies (or fills) into that view. Advanced
// indexing (tensors, lists or bools as indices) is refused with an IndexError.
#include <optional>
#include <string>

#include "bindings.h"
#include "ferry/core/error.h"

namespace ferry::python {
namespace {

std::optional<int64_t> slice_part(PyObject* value) {
  if (value == Py_None) return std::nullopt;
  return py::handle(value).cast<int64_t>();  // accepts anything with __index__
}

bool is_integer(py::handle item) {
  return !PyBool_Check(item.ptr()) && (PyLong_Check(item.ptr()) || PyIndex_Check(item.ptr())) &&
         !py::isinstance<Tensor>(item);
}

Tensor index(const Tensor& self, py::handle key) {
  const py::tuple items =
      PyTuple_Check(key.ptr()) ? py::reinterpret_borrow<py::tuple>(key) : py::make_tuple(key);
  int64_t consumed = 0;
  bool ellipsis = false;
  for (py::handle item : items) {
    if (item.ptr() == Py_Ellipsis) {
      if (ellipsis) throw py::index_error("an index can only have a single ellipsis ('...')");
      ellipsis = true;
    } else if (is_integer(item) || PySlice_Check(item.ptr())) {
      ++consumed;
    } else if (!item.is_none()) {
      throw py::index_error(
          "only integers, slices (':'), ellipsis ('...') and None are valid indices; ferry has "
          "no advanced indexing, but got " +
          std::string(py::str(py::type::handle_of(item))));
    }
  }
  if (consumed > self.dim()) {
    throw py::index_error("too many indices for a tensor of dimension " +
                          std::to_string(self.dim()));
  }
  Tensor out = self;
  int64_t dim = 0;
  for (py::handle item : items) {
    if (item.ptr() == Py_Ellipsis) {
      dim += self.dim() - consumed;
    } else if (item.is_none()) {
      out = out.unsqueeze(dim++);
    } else if (PySlice_Check(item.ptr())) {
      auto* s = reinterpret_cast<PySliceObject*>(item.ptr());
      const int64_t step = slice_part(s->step).value_or(1);
      if (step <= 0)
        throw py::value_error("slice step must be positive, but got " + std::to_string(step));
      out = out.slice(dim++, slice_part(s->start), slice_part(s->stop), step);
    } else {
      out = out.select(dim, item.cast<int64_t>());
    }
  }
  return out;
}

}  // namespace

void bind_indexing(py::class_<Tensor>& tensor) {
  tensor.def("__getitem__", &index, py::arg("key"));
  tensor.def(
      "__setitem__",
      [](const Tensor& self, py::handle key, py::handle value) {
        Tensor view = index(self, key);
        if (py::isinstance<Tensor>(value)) {
          const Tensor src = value.cast<Tensor>();
          py::gil_scoped_release release;
          view.copy_(src);
        } else if (PyBool_Check(value.ptr()) || PyLong_Check(value.ptr()) ||
                   PyFloat_Check(value.ptr()) || PyComplex_Check(value.ptr())) {
          const Scalar s = scalar_from_python(value);
          py::gil_scoped_release release;
          view.fill_(s);
        } else {
          const Tensor src = tensor_from_data(value, view.dtype());
          py::gil_scoped_release release;
          view.copy_(src);
        }
      },
      py::arg("key"), py::arg("value"));
}

}  // namespace ferry::python
