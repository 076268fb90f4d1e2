// ferry.switch.Client: the C++ client of `ferry serve` (ferry/switch/client.h) from Python. A
// request names a model and passes its inputs as a dict of named tensors, a list (named input0,
// input1, ...) or one tensor; the answer is an InferResult with the outputs by name and the
// server's timings. A failed request raises ferry.SwitchError with the server's code. Calls run
// with the GIL released; one client serves one request at a time.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "ferry/switch/client.h"

namespace ferry::python {
namespace {

using switch_::Client;
using switch_::NamedTensor;

std::vector<NamedTensor> inputs_from_python(const py::handle& inputs) {
  std::vector<NamedTensor> out;
  if (py::isinstance<Tensor>(inputs)) {
    out.push_back({"input0", inputs.cast<Tensor>()});
  } else if (py::isinstance<py::dict>(inputs)) {
    for (auto item : py::reinterpret_borrow<py::dict>(inputs)) {
      out.push_back({item.first.cast<std::string>(), item.second.cast<Tensor>()});
    }
  } else if (py::isinstance<py::sequence>(inputs) && !py::isinstance<py::str>(inputs)) {
    for (py::handle t : py::reinterpret_borrow<py::sequence>(inputs)) {
      out.push_back({"input" + std::to_string(out.size()), t.cast<Tensor>()});
    }
  } else {
    throw py::type_error(
        "Client.infer(): expected the inputs as a Tensor, a list of Tensors or a dict of "
        "name -> Tensor, but got " +
        std::string(py::str(py::type::handle_of(inputs).attr("__name__"))));
  }
  return out;
}

struct PyInferResult {
  py::dict outputs;
  py::dict timings;
};

std::chrono::milliseconds milliseconds_from_seconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

}  // namespace

void bind_switch(py::module_& m) {
  py::module_ s = m.def_submodule("_switch", "ferry.switch's client");
  py::class_<PyInferResult>(s, "InferResult", "A served request's outputs and timings.")
      .def_readonly("outputs", &PyInferResult::outputs)
      .def_readonly("timings", &PyInferResult::timings)
      .def("__repr__", [](const PyInferResult& r) {
        return "InferResult(outputs=" + std::string(py::repr(r.outputs)) +
               ", timings=" + std::string(py::repr(r.timings)) + ")";
      });
  py::class_<Client>(s, "Client", "A connection to a ferry serve server (docs/switch.md).")
      .def(py::init([](std::optional<std::string> socket, std::optional<uint16_t> port,
                       double connect_timeout, double answer_timeout) {
             if (socket.has_value() == port.has_value()) {
               throw py::type_error(
                   "Client(): expected exactly one of socket= (a Unix socket path) and port= (a "
                   "loopback TCP port)");
             }
             switch_::ClientOptions options;
             options.connect_timeout = milliseconds_from_seconds(connect_timeout);
             options.answer_timeout = milliseconds_from_seconds(answer_timeout);
             py::gil_scoped_release release;
             // Client is not movable: the tcp() result initializes the new object directly.
             if (port) return std::unique_ptr<Client>(new Client(Client::tcp(*port, options)));
             return std::make_unique<Client>(*socket, options);
           }),
           py::arg("socket") = py::none(), py::kw_only(), py::arg("port") = py::none(),
           py::arg("connect_timeout") = 10.0, py::arg("answer_timeout") = 120.0)
      .def(
          "infer",
          [](Client& client, const std::string& model, const py::handle& inputs, double deadline) {
            const std::vector<NamedTensor> tensors = inputs_from_python(inputs);
            switch_::InferResult result;
            {
              py::gil_scoped_release release;
              result = client.infer(model, tensors, milliseconds_from_seconds(deadline));
            }
            PyInferResult out;
            for (const NamedTensor& t : result.outputs) out.outputs[py::str(t.name)] = t.tensor;
            out.timings["queue_ms"] = result.timings.queue_ms;
            out.timings["transfer_ms"] = result.timings.transfer_ms;
            out.timings["compute_ms"] = result.timings.compute_ms;
            return out;
          },
          py::arg("model"), py::arg("inputs"), py::kw_only(), py::arg("deadline") = 0.0,
          "Runs `model` on the server; deadline in seconds (0: none).")
      .def_property_readonly("connected", &Client::connected);
}

}  // namespace ferry::python
