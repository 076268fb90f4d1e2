// ferry.Stream, ferry.Event and `with ferry.stream(s):`, over ferry/device's Stream, Event and
// StreamGuard. Waiting calls (synchronize, elapsed_time) release the GIL; an Event is guarded by
// its own mutex, since the C++ Event must not be used by two threads at once.
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "bindings.h"
#include "ferry/device/event.h"
#include "ferry/device/guard.h"
#include "ferry/device/stream.h"

namespace ferry::python {
namespace {

struct PyEvent {
  explicit PyEvent(bool enable_timing) : event(enable_timing) {}
  mutable std::mutex mutex;
  Event event;
};

// The context manager behind `with ferry.stream(s):` (a None stream changes nothing).
struct StreamContext {
  std::optional<Stream> stream;
  std::unique_ptr<StreamGuard> guard;
};

Stream current_accelerator_stream(std::optional<Device> device) {
  return current_stream(device.value_or(Device(DeviceType::CPU)));
}

}  // namespace

void bind_stream(py::module_& m) {
  py::class_<Stream>(m, "Stream",
                     "An in-order queue of device work. Stream(device) takes the next stream of "
                     "the device's pool; Stream(device, id=k) names stream k (0: the default).")
      .def(py::init([](Device device, std::optional<StreamId> id) {
             return id ? Stream(device, *id) : get_stream_from_pool(device);
           }),
           py::arg("device"), py::arg("id") = py::none())
      .def_property_readonly("device", &Stream::device)
      .def_property_readonly("id", &Stream::id)
      .def("query", &Stream::query)
      .def("synchronize", &Stream::synchronize, py::call_guard<py::gil_scoped_release>())
      .def("wait_stream", &Stream::wait_stream, py::arg("stream"))
      .def(
          "wait_event",
          [](const Stream& s, const PyEvent& e) {
            std::lock_guard<std::mutex> lock(e.mutex);
            py::gil_scoped_release release;
            s.wait_event(e.event);
          },
          py::arg("event"))
      .def(
          "record_event",
          [](const Stream& s, std::shared_ptr<PyEvent> e) {
            if (!e) e = std::make_shared<PyEvent>(false);
            std::lock_guard<std::mutex> lock(e->mutex);
            e->event.record(s);
            return e;
          },
          py::arg("event") = py::none())
      .def("__eq__", [](const Stream& a, const Stream& b) { return a == b; })
      .def("__hash__", [](const Stream& s) { return std::hash<Stream>()(s); })
      .def("__repr__", [](const Stream& s) { return "<ferry.Stream " + s.str() + ">"; });

  py::class_<PyEvent, std::shared_ptr<PyEvent>>(
      m, "Event", "A marker in a stream's queue (torch.cuda.Event's methods).")
      .def(py::init<bool>(), py::arg("enable_timing") = false)
      .def(
          "record",
          [](PyEvent& e, std::optional<Stream> stream) {
            std::lock_guard<std::mutex> lock(e.mutex);
            if (stream) {
              e.event.record(*stream);
            } else {
              e.event.record();
            }
          },
          py::arg("stream") = py::none())
      .def(
          "wait",
          [](const PyEvent& e, std::optional<Stream> stream) {
            std::lock_guard<std::mutex> lock(e.mutex);
            py::gil_scoped_release release;  // blocks the host when the stream cannot wait
            e.event.block(stream ? *stream : current_accelerator_stream(e.event.device()));
          },
          py::arg("stream") = py::none())
      .def("query",
           [](const PyEvent& e) {
             std::lock_guard<std::mutex> lock(e.mutex);
             return e.event.query();
           })
      .def("synchronize",
           [](const PyEvent& e) {
             py::gil_scoped_release release;
             std::lock_guard<std::mutex> lock(e.mutex);
             e.event.synchronize();
           })
      .def(
          "elapsed_time",
          [](const PyEvent& start, const PyEvent& end) {
            py::gil_scoped_release release;
            std::scoped_lock lock(start.mutex, end.mutex);
            return start.event.elapsed_time(end.event);
          },
          py::arg("end"), "Milliseconds from this event to `end` (both timing events).")
      .def_property_readonly("device", [](const PyEvent& e) { return e.event.device(); });

  py::class_<StreamContext>(m, "_StreamContext")
      .def("__enter__",
           [](StreamContext& c) -> std::optional<Stream> {
             if (c.stream && !c.guard) c.guard = std::make_unique<StreamGuard>(*c.stream);
             return c.stream;
           })
      .def("__exit__", [](StreamContext& c, py::args) { c.guard.reset(); });
  m.def(
      "stream",
      [](std::optional<Stream> s) {
        return StreamContext{s, nullptr};
      },
      py::arg("stream"),
      "`with ferry.stream(s):` makes s (and its device) current in the block; None changes "
      "nothing.");
  m.def(
      "current_stream", [](Device device) { return current_stream(device); }, py::arg("device"));
  m.def(
      "default_stream", [](Device device) { return default_stream(device); }, py::arg("device"));
  m.def("set_stream", &set_current_stream, py::arg("stream"));
  m.def(
      "wait_stream",
      [](const Stream& waiter, const Stream& target) { wait_stream(waiter, target); },
      py::arg("waiter"), py::arg("target"));
}

}  // namespace ferry::python
