// The Python DLPack protocol over ferry/interop/dlpack.h: t.__dlpack__(stream, max_version,
// dl_device, copy) and t.__dlpack_device__() as a producer, ferry.from_dlpack(obj | capsule) as a
// consumer (legacy "dltensor" and versioned "dltensor_versioned" capsules). A capsule nobody
// consumed releases its tensor when it is collected; a consumed one is renamed "used_*" and is
// then the consumer's to release. Imported tensors run the producer's deleter with the GIL held.
#include <Python.h>

#include <optional>
#include <string>

#include "bindings.h"
#include "ferry/core/error.h"
#include "ferry/interop/dlpack.h"

namespace ferry::python {
namespace {

constexpr const char* kLegacyName = "dltensor";
constexpr const char* kLegacyUsed = "used_dltensor";
constexpr const char* kVersionedName = "dltensor_versioned";
constexpr const char* kVersionedUsed = "used_dltensor_versioned";

// The capsule's destructor: releases the export unless a consumer took it.
template <typename Managed>
void capsule_destructor(PyObject* capsule, const char* name, const char* used) {
  if (PyCapsule_IsValid(capsule, used)) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);  // an exception may be in flight: keep it
  auto* managed = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
  if (managed == nullptr) {
    PyErr_WriteUnraisable(capsule);
  } else if (managed->deleter != nullptr) {
    managed->deleter(managed);
  }
  PyErr_Restore(type, value, traceback);
}

void legacy_destructor(PyObject* c) {
  capsule_destructor<DLManagedTensor>(c, kLegacyName, kLegacyUsed);
}
void versioned_destructor(PyObject* c) {
  capsule_destructor<DLManagedTensorVersioned>(c, kVersionedName, kVersionedUsed);
}

py::object make_capsule(const DLPackExport& e) {
  PyObject* capsule = e.versioned != nullptr
                          ? PyCapsule_New(e.versioned, kVersionedName, &versioned_destructor)
                          : PyCapsule_New(e.legacy, kLegacyName, &legacy_destructor);
  if (capsule == nullptr) {
    if (e.versioned != nullptr) e.versioned->deleter(e.versioned);
    if (e.legacy != nullptr) e.legacy->deleter(e.legacy);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(capsule);
}

std::optional<DLDevice> dl_device_from_python(py::handle obj) {
  if (obj.is_none()) return std::nullopt;
  const auto pair = obj.cast<py::sequence>();
  if (pair.size() != 2) throw py::value_error("dl_device: expected (device_type, device_id)");
  DLDevice d{};
  d.device_type = static_cast<DLDeviceType>(pair[0].cast<int>());
  d.device_id = pair[1].cast<int>();
  return d;
}

py::object dlpack(const Tensor& t, py::object stream, py::object max_version, py::object dl_device,
                  std::optional<bool> copy) {
  DLPackExportOptions o;
  if (!stream.is_none()) {
    if (!PyLong_Check(stream.ptr())) {
      throw py::type_error("__dlpack__: expected stream to be None or an integer, but got " +
                           std::string(py::str(py::type::handle_of(stream).attr("__name__"))));
    }
    o.stream = stream.cast<int64_t>();
  }
  if (!max_version.is_none()) {
    const auto v = max_version.cast<py::sequence>();
    if (v.size() != 2) throw py::value_error("max_version: expected (major, minor)");
    o.max_version = DLPackVersion{v[0].cast<uint32_t>(), v[1].cast<uint32_t>()};
  }
  o.dl_device = dl_device_from_python(dl_device);
  o.copy = copy;
  DLPackExport e;
  {
    py::gil_scoped_release release;  // may copy, and records events
    e = export_dlpack(t, o);
  }
  return make_capsule(e);
}

DLPackImportOptions import_options(std::optional<bool> copy) {
  DLPackImportOptions o;
  o.copy = copy;
  o.run_deleter = [](const std::function<void()>& call) {
    if (!Py_IsInitialized()) return;  // the interpreter is gone: leak rather than crash
    py::gil_scoped_acquire gil;
    call();
  };
  return o;
}

// Takes the tensor out of a capsule; the capsule is renamed only once ferry owns it, so on an
// error the capsule still releases it.
Tensor consume_capsule(py::handle capsule, std::optional<bool> copy) {
  PyObject* c = capsule.ptr();
  Tensor out;
  if (PyCapsule_IsValid(c, kVersionedName)) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, kVersionedName));
    out = from_dlpack(m, import_options(copy));
    PyCapsule_SetName(c, kVersionedUsed);
  } else if (PyCapsule_IsValid(c, kLegacyName)) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, kLegacyName));
    out = from_dlpack(m, import_options(copy));
    PyCapsule_SetName(c, kLegacyUsed);
  } else {
    const char* name = PyCapsule_GetName(c);
    PyErr_Clear();
    throw DLPackError(std::string("from_dlpack: expected a \"dltensor\" or \"dltensor_versioned\" "
                                  "capsule that was not consumed yet, but got one named \"") +
                      (name != nullptr ? name : "") + "\"");
  }
  return out;
}

Tensor from_dlpack_object(py::handle obj, py::object device, std::optional<bool> copy) {
  const std::optional<Device> want = device.is_none() ? std::nullopt : device_from_python(device);
  if (!device.is_none() && !want) throw py::type_error("from_dlpack: device: expected a device");
  if (PyCapsule_CheckExact(obj.ptr())) {
    Tensor t = consume_capsule(obj, copy);
    if (want && t.device() != *want) {
      py::gil_scoped_release release;
      t = t.to(TensorOptions().device(*want));
    }
    return t;
  }
  if (!py::hasattr(obj, "__dlpack__")) {
    throw py::type_error(
        "from_dlpack: expected an object with __dlpack__ or a DLPack capsule, "
        "but got " +
        std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
  }
  // The consumer's stream on the device the data is on, and on the one it is asked for.
  auto stream_for = [](DLDevice d) -> py::object {
    try {
      const std::optional<int64_t> s = dlpack_consumer_stream(d);
      return s ? py::object(py::int_(*s)) : py::object(py::none());
    } catch (const DLPackError&) {
      return py::none();  // a device ferry lacks: the import below says so
    }
  };
  py::object source_stream = py::none();
  if (py::hasattr(obj, "__dlpack_device__")) {
    const auto dev = obj.attr("__dlpack_device__")().cast<py::sequence>();
    DLDevice d{};
    d.device_type = static_cast<DLDeviceType>(dev[0].cast<int>());
    d.device_id = dev[1].cast<int>();
    source_stream = stream_for(d);
  }
  py::dict kwargs;
  kwargs["stream"] = want ? stream_for(to_dlpack_device(*want)) : source_stream;
  kwargs["max_version"] = py::make_tuple(dlpack::kMajor, dlpack::kMinor);
  if (want) {
    const DLDevice d = to_dlpack_device(*want);
    kwargs["dl_device"] = py::make_tuple(static_cast<int>(d.device_type), d.device_id);
  }
  if (copy) kwargs["copy"] = *copy;
  // A producer that predates DLPack 1.0's keywords (numpy 1.24, torch 1.13) raises TypeError
  // for them: ask it as 0.x, and remember its type so that the next exchange asks so at once.
  static py::set* legacy_types = new py::set();  // leaked: used until the interpreter exits
  const py::handle type = py::type::handle_of(obj);
  py::object capsule;
  bool producer_did_all = !legacy_types->contains(type);
  if (producer_did_all) {
    try {
      capsule = obj.attr("__dlpack__")(**kwargs);
    } catch (py::error_already_set& e) {
      if (!e.matches(PyExc_TypeError)) throw;
      producer_did_all = false;
      legacy_types->add(type);
    }
  }
  if (!producer_did_all) capsule = obj.attr("__dlpack__")(py::arg("stream") = source_stream);
  Tensor t =
      consume_capsule(capsule, producer_did_all ? (copy == false ? copy : std::nullopt) : copy);
  if (!producer_did_all && want && t.device() != *want) {
    if (copy == false) {
      throw DLPackError("from_dlpack: the producer cannot move its data to " + want->str() +
                        " and copy=False forbids ferry to copy it");
    }
    py::gil_scoped_release release;
    t = t.to(TensorOptions().device(*want));
  }
  return t;
}

}  // namespace

void bind_dlpack(py::module_& m, py::class_<Tensor>& tensor) {
  tensor.def("__dlpack__", &dlpack, py::arg("stream") = py::none(), py::kw_only(),
             py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(),
             py::arg("copy") = py::none(),
             "Exports the tensor as a DLPack capsule (the array API's protocol; see "
             "docs/python.md for sim streams).");
  tensor.def("__dlpack_device__", [](const Tensor& t) {
    const DLDevice d = to_dlpack_device(t.device());
    return py::make_tuple(static_cast<int>(d.device_type), d.device_id);
  });
  m.def("from_dlpack", &from_dlpack_object, py::arg("obj"), py::kw_only(),
        py::arg("device") = py::none(), py::arg("copy") = py::none(),
        "A ferry tensor sharing the memory of `obj` (anything with __dlpack__, or a capsule).");
  m.def(
      "to_dlpack",
      [](const Tensor& t) { return dlpack(t, py::none(), py::none(), py::none(), {}); },
      py::arg("tensor"), "A legacy \"dltensor\" capsule (torch.utils.dlpack.to_dlpack's form).");
  m.def("_dlpack_exports_alive", &dlpack_exports_alive,
        "Exports whose deleter has not run yet (for leak tests).");
  m.attr("DLPACK_VERSION") = py::make_tuple(dlpack::kMajor, dlpack::kMinor);
}

}  // namespace ferry::python
