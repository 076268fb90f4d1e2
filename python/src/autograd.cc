// Autograd in Python with torch's names: Tensor.requires_grad (property and requires_grad_()),
// .grad, .grad_fn (a node object with name()), .is_leaf, .retain_grad(), .backward(),
// .detach()/.detach_(), and grad mode (ferry.is_grad_enabled, ferry.set_grad_enabled; the
// no_grad / enable_grad / set_grad_enabled context managers are in ferry/autograd.py). Grad mode is
// per thread, as in torch. backward() runs with the GIL released: the engine's device threads never
// call into Python.
#include <optional>
#include <string>

#include "bindings.h"
#include "ferry/autograd/grad_mode.h"
#include "ferry/autograd/node.h"

namespace ferry::python {
namespace {

// What Tensor.grad_fn returns: the node that made a tensor.
struct GradFn {
  IntrusivePtr<autograd::Node> node;
};

py::object grad_fn_object(const Tensor& t) {
  IntrusivePtr<autograd::Node> node = t.grad_fn();
  if (!node) return py::none();
  return py::cast(GradFn{std::move(node)});
}

}  // namespace

void bind_autograd(py::module_& m, py::class_<Tensor>& t) {
  py::class_<GradFn>(m, "GradFn", "The autograd node that made a tensor (Tensor.grad_fn).")
      .def("name", [](const GradFn& f) { return f.node->name(); })
      .def("__repr__", [](const GradFn& f) { return "<" + f.node->name() + ">"; });

  t.def_property(
       "requires_grad", [](const Tensor& s) { return s.requires_grad(); },
       [](Tensor& s, bool on) { s.requires_grad_(on); })
      .def(
          "requires_grad_",
          [](py::object self, bool on) {
            self.cast<Tensor&>().requires_grad_(on);
            return self;
          },
          py::arg("requires_grad") = true)
      .def_property(
          "grad",
          [](const Tensor& s) -> py::object {
            const Tensor& g = s.grad();
            return g.defined() ? py::cast(g) : py::none();
          },
          [](const Tensor& s, std::optional<Tensor> g) { s.mutable_grad() = g ? *g : Tensor(); })
      .def_property_readonly("grad_fn", &grad_fn_object)
      .def_property_readonly("is_leaf", [](const Tensor& s) { return s.is_leaf(); })
      .def("retain_grad", [](const Tensor& s) { s.retain_grad(); })
      .def_property_readonly("retains_grad", [](const Tensor& s) { return s.retains_grad(); })
      .def(
          "backward",
          [](const Tensor& s, std::optional<Tensor> gradient, std::optional<bool> retain_graph,
             bool create_graph) {
            py::gil_scoped_release release;
            s.backward(gradient ? *gradient : Tensor(), retain_graph, create_graph);
          },
          py::arg("gradient") = py::none(), py::arg("retain_graph") = py::none(),
          py::arg("create_graph") = false)
      .def("detach", [](const Tensor& s) { return s.detach(); })
      .def("detach_", [](py::object self) {
        self.cast<Tensor&>().detach_();
        return self;
      });

  m.def("is_grad_enabled", [] { return autograd::GradMode::is_enabled(); });
  m.def(
      "_set_grad_enabled", [](bool on) { autograd::GradMode::set_enabled(on); }, py::arg("mode"));
}

}  // namespace ferry::python
