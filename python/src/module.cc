// The extension module ferry._C: calls each area's bind function once, in dependency order
// (errors and dtypes first, since every later signature converts them). The pure-Python package
// ferry/ re-exports it; docs/python.md describes the API.
#include "bindings.h"
#include "ferry/version.h"

PYBIND11_MODULE(_C, m) {
  namespace fp = ferry::python;
  m.doc() = "ferry: moves tensors between layouts, dtypes, devices, streams and processes";
  m.attr("__version__") = FERRY_VERSION;
  fp::bind_errors(m);
  fp::bind_dtype(m);
  fp::bind_device(m);
  fp::bind_stream(m);
  fp::bind_tensor(m);  // also binds indexing, numpy, DLPack, the operators and autograd onto it
  fp::bind_factories(m);
  fp::bind_memory(m);
  fp::bind_nn(m);
  fp::bind_pipeline(m);  // and ferry.safetensors
  fp::bind_switch(m);
}
