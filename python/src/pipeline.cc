// ferry.safetensors (load_file / save_file, the safetensors package's names) and
// ferry.pipeline.GPipe (torchgpipe's GPipe over a ferry.nn.Sequential). Files are read and
// written, and pipelines run, with the GIL released.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "ferry/nn/layers.h"
#include "ferry/nn/safetensors.h"
#include "ferry/pipeline/gpipe.h"

namespace ferry::python {
namespace {

void bind_safetensors(py::module_ st) {
  st.def(
      "load_file",
      [](const std::string& path, std::optional<Device> device) {
        safetensors::LoadOptions options;
        if (device) options.device = *device;
        safetensors::LoadedTensors loaded;
        {
          py::gil_scoped_release release;
          loaded = safetensors::load(path, options);
        }
        py::dict out;
        for (const auto& item : loaded) out[py::str(item.key())] = item.value();
        return out;
      },
      py::arg("filename"), py::arg("device") = py::none(),
      "The file's tensors by name (contiguous, the file's dtypes), on `device` (default cpu).");
  st.def(
      "save_file",
      [](const py::dict& tensors, const std::string& path,
         std::optional<std::map<std::string, std::string>> metadata) {
        TensorDict dict;
        for (auto item : tensors) {
          dict.insert(item.first.cast<std::string>(), item.second.cast<Tensor>());
        }
        py::gil_scoped_release release;
        safetensors::save(path, dict, metadata.value_or(safetensors::Metadata{}));
      },
      py::arg("tensors"), py::arg("filename"), py::arg("metadata") = py::none());
}

void bind_gpipe(py::module_ p) {
  using pipeline::GPipe;
  py::class_<GPipe>(p, "GPipe",
                    "torchgpipe's GPipe: a Sequential split into partitions on devices, run on "
                    "micro-batches (docs/pipeline.md).")
      .def(py::init([](const std::shared_ptr<nn::SequentialImpl>& module,
                       std::vector<int64_t> balance, std::vector<Device> devices, int64_t chunks,
                       const std::string& checkpoint, bool deferred_batch_norm) {
             py::gil_scoped_release release;
             return std::make_unique<GPipe>(nn::Sequential(module), std::move(balance),
                                            std::move(devices), chunks, checkpoint,
                                            deferred_batch_norm);
           }),
           py::arg("module"), py::arg("balance"), py::arg("devices"), py::arg("chunks") = 1,
           py::arg("checkpoint") = "except_last", py::arg("deferred_batch_norm") = false)
      .def("forward", &GPipe::forward, py::arg("input"), py::call_guard<py::gil_scoped_release>())
      .def("__call__", &GPipe::forward, py::arg("input"), py::call_guard<py::gil_scoped_release>())
      .def(
          "train",
          [](py::object self, bool mode) {
            self.cast<GPipe&>().train(mode);
            return self;
          },
          py::arg("mode") = true)
      .def("eval",
           [](py::object self) {
             self.cast<GPipe&>().eval();
             return self;
           })
      .def_property_readonly("training", &GPipe::is_training)
      .def("parameters", &GPipe::parameters)
      .def_property_readonly("partitions",
                             [](const GPipe& g) {
                               std::vector<std::shared_ptr<nn::SequentialImpl>> out;
                               for (const nn::Sequential& s : g.partitions())
                                 out.push_back(s.ptr());
                               return out;
                             })
      .def_property_readonly("devices", &GPipe::devices)
      .def_property_readonly("balance", &GPipe::balance)
      .def_property_readonly("chunks", &GPipe::chunks)
      .def_property_readonly("checkpoint", [](const GPipe& g) {
        return std::string(pipeline::checkpoint_mode_name(g.checkpoint()));
      });
}

}  // namespace

void bind_pipeline(py::module_& m) {
  bind_safetensors(m.def_submodule("_safetensors", "Reading and writing safetensors files."));
  bind_gpipe(m.def_submodule("_pipeline", "Pipeline parallelism (torchgpipe's GPipe)."));
}

}  // namespace ferry::python
