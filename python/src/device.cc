// ferry.device and the device-level functions: devices(), device_count(), synchronize(), the
// current device, and the CPU thread count and seed. Blocking calls release the GIL.
#include <map>
#include <string>
#include <vector>

#include "bindings.h"
#include "ferry/backends/sim/sim.h"
#include "ferry/core/error.h"
#include "ferry/core/generator.h"
#include "ferry/device/backend.h"
#include "ferry/device/runtime.h"
#include "ferry/iter/parallel.h"

namespace ferry::python {
namespace {

DeviceType type_from_name(const std::string& name) { return Device(name).type(); }

std::string device_repr(Device d) {
  std::string out = "device(type='" + std::string(device_type_name(d.type())) + "'";
  if (d.has_index()) out += ", index=" + std::to_string(d.index());
  return out + ")";
}

}  // namespace

py::object device_object(Device device) { return py::cast(PyDevice{device}); }

std::optional<Device> device_from_python(py::handle src) {
  if (PyUnicode_Check(src.ptr())) return Device(src.cast<std::string>());
  if (py::isinstance<PyDevice>(src)) return src.cast<const PyDevice&>().device;
  if (src.is_none()) return std::nullopt;
  const py::handle type = py::type::handle_of(src);
  if (py::str(type.attr("__module__")).cast<std::string>() == "torch" &&
      py::str(type.attr("__name__")).cast<std::string>() == "device") {
    return Device(py::str(src).cast<std::string>());
  }
  return std::nullopt;
}

void bind_device(py::module_& m) {
  py::class_<PyDevice>(m, "device", "Where a tensor's bytes live: ferry.device('sim:0').")
      .def(py::init([](const std::string& spec) { return PyDevice{Device(spec)}; }),
           py::arg("spec"))
      .def(py::init([](const std::string& type, int index) {
             return PyDevice{Device(type_from_name(type), static_cast<DeviceIndex>(index))};
           }),
           py::arg("type"), py::arg("index"))
      .def_property_readonly("type",
                             [](const PyDevice& d) { return device_type_name(d.device.type()); })
      .def_property_readonly("index",
                             [](const PyDevice& d) -> std::optional<int> {
                               if (!d.device.has_index()) return std::nullopt;
                               return d.device.index();
                             })
      .def("__str__", [](const PyDevice& d) { return d.device.str(); })
      .def("__repr__", [](const PyDevice& d) { return device_repr(d.device); })
      .def("__eq__",
           [](const PyDevice& d, py::handle other) {
             try {
               const auto o = device_from_python(other);
               return o && *o == d.device;
             } catch (const Error&) {
               return false;  // a string that names no device
             }
           })
      .def("__hash__", [](const PyDevice& d) { return std::hash<Device>()(d.device); })
      .def("__reduce__", [](const PyDevice& d) {
        return py::make_tuple(py::module_::import("ferry").attr("device"),
                              py::make_tuple(d.device.str()));
      });

  m.def(
      "devices",
      [] {
        std::vector<Device> out{Device(DeviceType::CPU)};
        for (DeviceType t : {DeviceType::Sim, DeviceType::CUDA}) {
          const int n = device_count(t);
          for (int i = 0; i < n; ++i) out.emplace_back(t, static_cast<DeviceIndex>(i));
        }
        return out;
      },
      "Every device this process can use: the cpu, then each sim and CUDA device.");
  m.def(
      "_finish_queued_work",
      [] {
        // Only backends already in use: none is created (no CUDA context, say) at exit.
        for (DeviceType t : {DeviceType::Sim, DeviceType::CUDA}) {
          Backend* backend = created_backend(t);
          if (backend == nullptr) continue;
          for (int i = 0, n = backend->device_count(); i < n; ++i) {
            try {
              backend->device_synchronize(i);
            } catch (const Error&) {
              // A failed host function was the program's to handle; exit anyway.
            }
          }
        }
      },
      py::call_guard<py::gil_scoped_release>(),
      "Waits for the work queued on every device of the backends in use (run at exit).");
  m.def(
      "device_count", [](const std::string& type) { return device_count(type_from_name(type)); },
      py::arg("type"), "How many devices of a type ('sim', 'cuda'; 'cpu' is 1) there are.");
  m.def(
      "device_unavailable_reason",
      [](const std::string& type) { return device_unavailable_reason(type_from_name(type)); },
      py::arg("type"), "Why device_count(type) is 0; empty when there are devices.");
  m.def(
      "current_device",
      [](const std::string& type) { return current_device(type_from_name(type)); },
      py::arg("type"));
  m.def("set_device", &set_device, py::arg("device"));
  m.def("synchronize", &device_synchronize, py::arg("device"),
        py::call_guard<py::gil_scoped_release>(),
        "Blocks until all work queued on every stream of the device is done.");
  m.def("get_num_threads", &get_num_threads);
  m.def("set_num_threads", &set_num_threads, py::arg("n"),
        "Threads the CPU copies use (the caller included).");
  m.def(
      "manual_seed", [](uint64_t seed) { manual_seed(seed); }, py::arg("seed"));

  py::module_ sim_module = m.def_submodule("_sim", "ferry.sim's functions");
  sim_module.def(
      "configure",
      [](const std::map<std::string, std::string>& settings) {
        const sim::SimConfig config =
            sim::SimConfig::from_env([&](const char* name) -> const char* {
              const auto it = settings.find(name);
              return it == settings.end() ? nullptr : it->second.c_str();
            });
        py::gil_scoped_release release;  // waits for queued sim work
        sim::configure(config);
      },
      py::arg("settings"),
      "Replaces the sim's settings, given as FERRY_SIM_* variables ({'FERRY_SIM_LATENCY': "
      "'10us'}); unnamed ones take their defaults (not the environment's).");
  sim_module.def("reset", &sim::reset_config, py::call_guard<py::gil_scoped_release>(),
                 "Back to the settings of the FERRY_SIM_* environment variables.");
  sim_module.def(
      "settings", [] { return sim::config().settings(); },
      "The settings in effect, as (FERRY_SIM_* name, value) pairs.");
}

}  // namespace ferry::python
