// ferry's C++ errors as Python exceptions. Each ferry error class becomes ferry.<Name>, a
// subclass of ferry.Error (itself a RuntimeError) and of the builtin exception Python code
// expects for it, so `except IndexError` and iteration's end work; messages pass unchanged.
#include <Python.h>

#include <exception>

#include "bindings.h"
#include "ferry/core/error.h"
#include "ferry/interop/dlpack.h"
#include "ferry/switch/types.h"

namespace ferry::python {
namespace {

struct Classes {
  PyObject* error = nullptr;
  PyObject* shape = nullptr;
  PyObject* dtype = nullptr;
  PyObject* device = nullptr;
  PyObject* index = nullptr;
  PyObject* oom = nullptr;
  PyObject* not_implemented = nullptr;
  PyObject* dlpack = nullptr;
  PyObject* switch_error = nullptr;
};

// Created once and never freed: the translator may run until the interpreter exits.
Classes& classes() {
  static Classes c;
  return c;
}

PyObject* make_class(py::module_& m, const char* name, PyObject* first, PyObject* second,
                     const char* doc) {
  PyObject* bases = second == nullptr ? PyTuple_Pack(1, first) : PyTuple_Pack(2, first, second);
  if (bases == nullptr) throw py::error_already_set();
  const std::string qualified = std::string("ferry.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  Py_DECREF(bases);
  if (cls == nullptr) throw py::error_already_set();
  m.attr(name) = py::handle(cls);  // the module holds one reference, `classes()` another
  return cls;
}

}  // namespace

void bind_errors(py::module_& m) {
  Classes& c = classes();
  c.error = make_class(m, "Error", PyExc_RuntimeError, nullptr, "Every error ferry raises.");
  c.shape = make_class(m, "ShapeError", c.error, PyExc_ValueError,
                       "Sizes or ranks that do not fit together.");
  c.dtype = make_class(m, "DTypeError", c.error, PyExc_TypeError,
                       "A dtype that is not allowed where it was given.");
  c.device = make_class(m, "DeviceError", c.error, nullptr,
                        "A device that is unknown, unavailable or mismatched, or a runtime error.");
  c.index = make_class(m, "IndexError", c.error, PyExc_IndexError,
                       "A dimension or element index outside its range.");
  c.oom = make_class(m, "OutOfMemoryError", c.error, PyExc_MemoryError,
                     "An allocation that could not be satisfied.");
  c.not_implemented = make_class(m, "NotImplementedError", c.error, PyExc_NotImplementedError,
                                 "A combination ferry does not support (yet).");
  c.dlpack = make_class(m, "DLPackError", c.error, PyExc_BufferError,
                        "A tensor that cannot be exchanged through DLPack as asked.");
  c.switch_error = make_class(m, "SwitchError", c.error, nullptr,
                              "A ferry serve request that failed; `code` names why "
                              "('unknown_model', 'bad_input', 'busy', ...).");

  py::register_exception_translator([](std::exception_ptr p) {
    const Classes& k = classes();
    try {
      if (p) std::rethrow_exception(p);
    } catch (const DLPackError& e) {
      PyErr_SetString(k.dlpack, e.what());
    } catch (const switch_::SwitchError& e) {
      // An instance with the server's error code as `code`.
      PyObject* error = PyObject_CallFunction(k.switch_error, "s", e.what());
      if (error == nullptr) return;  // the call's own exception stays set
      PyObject* code = PyUnicode_FromString(switch_::error_code_name(e.code()).c_str());
      if (code == nullptr || PyObject_SetAttrString(error, "code", code) != 0) {
        Py_XDECREF(code);
        Py_DECREF(error);
        return;
      }
      Py_DECREF(code);
      PyErr_SetObject(k.switch_error, error);
      Py_DECREF(error);
    } catch (const ShapeError& e) {
      PyErr_SetString(k.shape, e.what());
    } catch (const DTypeError& e) {
      PyErr_SetString(k.dtype, e.what());
    } catch (const DeviceError& e) {
      PyErr_SetString(k.device, e.what());
    } catch (const IndexError& e) {
      PyErr_SetString(k.index, e.what());
    } catch (const OutOfMemoryError& e) {
      PyErr_SetString(k.oom, e.what());
    } catch (const NotImplementedError& e) {
      PyErr_SetString(k.not_implemented, e.what());
    } catch (const Error& e) {
      PyErr_SetString(k.error, e.what());
    }
  });
}

}  // namespace ferry::python
