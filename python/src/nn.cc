// ferry.nn and ferry.nn.models: ferry's C++ modules as Python objects with torch.nn's method
// names (parameters, named_parameters, buffers, children, modules, state_dict, load_state_dict,
// to, cpu, train/eval, zero_grad, load for safetensors files, repr as PyTorch prints it), the
// layers with a Tensor -> Tensor forward (callable, and usable in Sequential), the model zoo
// (ResNet-18..152, MLP, BERT) and ferry.nn.functional. A module object shares the C++ module: a
// Sequential holds the very layers it was given, and indexing returns them. Moves, loads and
// forwards run with the GIL released.
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <typeindex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bindings.h"
#include "ferry/nn/layers.h"
#include "ferry/nn/models.h"
#include "ferry/ops/linalg.h"
#include "ferry/ops/nn_ops.h"

namespace ferry::python {
namespace {

using nn::Module;
using ModulePtr = std::shared_ptr<Module>;

// How to wrap a module of a bound Tensor -> Tensor class as an AnyModule (for Sequential).
std::unordered_map<std::type_index, std::function<nn::AnyModule(const ModulePtr&)>>&
any_module_makers() {
  static std::unordered_map<std::type_index, std::function<nn::AnyModule(const ModulePtr&)>> makers;
  return makers;
}

nn::AnyModule any_module_of(const ModulePtr& module) {
  if (!module) throw py::type_error("Sequential: expected a module, but got None");
  auto& makers = any_module_makers();
  auto it = makers.find(std::type_index(typeid(*module)));
  if (it == makers.end()) {
    throw py::type_error("Sequential: expected modules with a Tensor -> Tensor forward, but got " +
                         module->name());
  }
  return it->second(module);
}

// Binds Impl (derived from Module) as ferry.nn.<name> with forward/__call__ taking one tensor.
template <typename Impl>
py::class_<Impl, Module, std::shared_ptr<Impl>> bind_layer(py::module_& nn_m, const char* name) {
  any_module_makers()[std::type_index(typeid(Impl))] = [](const ModulePtr& m) {
    return nn::AnyModule(std::static_pointer_cast<Impl>(m));
  };
  py::class_<Impl, Module, std::shared_ptr<Impl>> cls(nn_m, name);
  auto forward = [](Impl& self, const Tensor& input) {
    py::gil_scoped_release release;
    return Tensor(self.forward(input));
  };
  cls.def("forward", forward, py::arg("input")).def("__call__", forward, py::arg("input"));
  return cls;
}

py::list named_list(const auto& dict) {
  py::list out;
  for (const auto& item : dict) out.append(py::make_tuple(item.key(), item.value()));
  return out;
}

// A state dict from Python: any mapping of str -> Tensor.
TensorDict tensor_dict_from_python(const py::handle& mapping) {
  TensorDict out;
  const py::dict dict(py::reinterpret_borrow<py::object>(mapping));
  for (auto item : dict) {
    out.insert(item.first.cast<std::string>(), item.second.cast<Tensor>());
  }
  return out;
}

py::dict dict_from_tensor_dict(const TensorDict& tensors) {
  py::dict out;
  for (const auto& item : tensors) out[py::str(item.key())] = item.value();
  return out;
}

// torch's _IncompatibleKeys: (missing_keys, unexpected_keys).
py::object incompatible_keys(const nn::LoadStateDictResult& r) {
  py::object named = py::module_::import("collections")
                         .attr("namedtuple")("IncompatibleKeys",
                                             py::make_tuple("missing_keys", "unexpected_keys"));
  return named(py::cast(r.missing_keys), py::cast(r.unexpected_keys));
}

void bind_module(py::module_& nn_m) {
  py::class_<Module, ModulePtr>(nn_m, "Module", "Base of every ferry module (torch.nn.Module).")
      .def_property_readonly("name", &Module::name)
      .def(
          "parameters", [](const Module& m, bool recurse) { return m.parameters(recurse); },
          py::arg("recurse") = true)
      .def(
          "named_parameters",
          [](const Module& m, bool recurse) { return named_list(m.named_parameters(recurse)); },
          py::arg("recurse") = true)
      .def(
          "buffers", [](const Module& m, bool recurse) { return m.buffers(recurse); },
          py::arg("recurse") = true)
      .def(
          "named_buffers",
          [](const Module& m, bool recurse) { return named_list(m.named_buffers(recurse)); },
          py::arg("recurse") = true)
      .def("children", &Module::children)
      .def("named_children", [](const Module& m) { return named_list(m.named_children()); })
      .def("modules", [](const Module& m) { return m.modules(); })
      .def("named_modules", [](const Module& m) { return named_list(m.named_modules()); })
      .def("state_dict", [](const Module& m) { return dict_from_tensor_dict(m.state_dict()); })
      .def(
          "load_state_dict",
          [](Module& m, const py::handle& state, bool strict) {
            TensorDict dict = tensor_dict_from_python(state);
            nn::LoadStateDictResult r;
            {
              py::gil_scoped_release release;
              r = m.load_state_dict(dict, strict);
            }
            return incompatible_keys(r);
          },
          py::arg("state_dict"), py::arg("strict") = true)
      .def(
          "load",
          [](Module& m, const std::string& path, std::optional<Device> device, bool strict) {
            nn::LoadStateDictResult r;
            {
              py::gil_scoped_release release;
              r = m.load(path, device, strict);
            }
            return incompatible_keys(r);
          },
          py::arg("path"), py::arg("device") = py::none(), py::arg("strict") = true,
          "Loads a safetensors file into the module by name; with a device, places it there.")
      .def(
          "to",
          [](py::object self, std::optional<Device> device, std::optional<ScalarType> dtype,
             bool non_blocking) {
            Module& m = self.cast<Module&>();
            py::gil_scoped_release release;
            if (device && dtype) {
              m.to(*device, *dtype, non_blocking);
            } else if (device) {
              m.to(*device, non_blocking);
            } else if (dtype) {
              m.to(*dtype, non_blocking);
            }
            return self;
          },
          py::arg("device") = py::none(), py::arg("dtype") = py::none(),
          py::arg("non_blocking") = false)
      .def("cpu",
           [](py::object self) {
             Module& m = self.cast<Module&>();
             py::gil_scoped_release release;
             m.cpu();
             return self;
           })
      .def(
          "train",
          [](py::object self, bool mode) {
            self.cast<Module&>().train(mode);
            return self;
          },
          py::arg("mode") = true)
      .def("eval",
           [](py::object self) {
             self.cast<Module&>().eval();
             return self;
           })
      .def_property_readonly("training", &Module::is_training)
      .def(
          "zero_grad", [](Module& m, bool set_to_none) { m.zero_grad(set_to_none); },
          py::arg("set_to_none") = true)
      .def("__repr__", [](const Module& m) {
        std::ostringstream out;
        m.pretty_print(out);
        return out.str();
      });
}

void bind_layers(py::module_& nn_m) {
  bind_layer<nn::LinearImpl>(nn_m, "Linear")
      .def(py::init<int64_t, int64_t, bool>(), py::arg("in_features"), py::arg("out_features"),
           py::arg("bias") = true)
      .def_readonly("weight", &nn::LinearImpl::weight)
      .def_readonly("bias", &nn::LinearImpl::bias);
  bind_layer<nn::ReLUImpl>(nn_m, "ReLU").def(py::init<bool>(), py::arg("inplace") = false);
  bind_layer<nn::GELUImpl>(nn_m, "GELU")
      .def(py::init<std::string>(), py::arg("approximate") = "none");
  bind_layer<nn::DropoutImpl>(nn_m, "Dropout")
      .def(py::init<double, bool>(), py::arg("p") = 0.5, py::arg("inplace") = false);
  bind_layer<nn::FlattenImpl>(nn_m, "Flatten")
      .def(py::init<int64_t, int64_t>(), py::arg("start_dim") = 1, py::arg("end_dim") = -1);
  bind_layer<nn::Conv2dImpl>(nn_m, "Conv2d")
      .def(py::init([](int64_t in_channels, int64_t out_channels, const py::object& kernel_size,
                       const py::object& stride, const py::object& padding,
                       const py::object& dilation, int64_t groups, bool bias) {
             return std::make_shared<nn::Conv2dImpl>(
                 nn::Conv2dOptions{.in_channels = in_channels,
                                   .out_channels = out_channels,
                                   .kernel_size = int_or_ints(kernel_size),
                                   .stride = int_or_ints(stride),
                                   .padding = int_or_ints(padding),
                                   .dilation = int_or_ints(dilation),
                                   .groups = groups,
                                   .bias = bias});
           }),
           py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"),
           py::arg("stride") = 1, py::arg("padding") = 0, py::arg("dilation") = 1,
           py::arg("groups") = 1, py::arg("bias") = true)
      .def_readonly("weight", &nn::Conv2dImpl::weight)
      .def_readonly("bias", &nn::Conv2dImpl::bias);
  bind_layer<nn::BatchNorm2dImpl>(nn_m, "BatchNorm2d")
      .def(py::init([](int64_t num_features, double eps, std::optional<double> momentum,
                       bool affine, bool track_running_stats) {
             return std::make_shared<nn::BatchNorm2dImpl>(
                 num_features, nn::BatchNormOptions{eps, momentum, affine, track_running_stats});
           }),
           py::arg("num_features"), py::arg("eps") = 1e-5, py::arg("momentum") = 0.1,
           py::arg("affine") = true, py::arg("track_running_stats") = true);
  bind_layer<nn::MaxPool2dImpl>(nn_m, "MaxPool2d")
      .def(py::init([](const py::object& kernel_size, const py::object& stride,
                       const py::object& padding, const py::object& dilation, bool ceil_mode) {
             return std::make_shared<nn::MaxPool2dImpl>(nn::MaxPool2dOptions{
                 int_or_ints(kernel_size),
                 stride.is_none() ? std::vector<int64_t>{} : int_or_ints(stride),
                 int_or_ints(padding), int_or_ints(dilation), ceil_mode});
           }),
           py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0,
           py::arg("dilation") = 1, py::arg("ceil_mode") = false);
  bind_layer<nn::AdaptiveAvgPool2dImpl>(nn_m, "AdaptiveAvgPool2d")
      .def(py::init([](const py::object& output_size) {
             return std::make_shared<nn::AdaptiveAvgPool2dImpl>(int_or_ints(output_size));
           }),
           py::arg("output_size"));
  bind_layer<nn::LayerNormImpl>(nn_m, "LayerNorm")
      .def(py::init([](const py::object& normalized_shape, double eps, bool affine) {
             return std::make_shared<nn::LayerNormImpl>(int_or_ints(normalized_shape), eps, affine);
           }),
           py::arg("normalized_shape"), py::arg("eps") = 1e-5,
           py::arg("elementwise_affine") = true);
  bind_layer<nn::EmbeddingImpl>(nn_m, "Embedding")
      .def(py::init<int64_t, int64_t, std::optional<int64_t>>(), py::arg("num_embeddings"),
           py::arg("embedding_dim"), py::arg("padding_idx") = py::none());
  bind_layer<nn::models::BasicBlockImpl>(nn_m, "_BasicBlock");
  bind_layer<nn::models::BottleneckImpl>(nn_m, "_Bottleneck");
  bind_layer<nn::models::ResNetImpl>(nn_m, "ResNet");

  bind_layer<nn::SequentialImpl>(nn_m, "Sequential")
      .def(py::init([](const py::args& modules) {
        auto seq = std::make_shared<nn::SequentialImpl>();
        for (py::handle m : modules) seq->push_back(any_module_of(m.cast<ModulePtr>()));
        return seq;
      }))
      .def("append",
           [](py::object self, const ModulePtr& module) {
             self.cast<nn::SequentialImpl&>().push_back(any_module_of(module));
             return self;
           })
      .def("__len__", &nn::SequentialImpl::size)
      .def("__getitem__", [](const nn::SequentialImpl& s, py::object index) -> py::object {
        if (PySlice_Check(index.ptr())) {
          size_t start = 0, stop = 0, step = 0, length = 0;
          if (!index.cast<py::slice>().compute(s.size(), &start, &stop, &step, &length)) {
            throw py::error_already_set();
          }
          return py::cast(s.slice(static_cast<int64_t>(start), static_cast<int64_t>(stop),
                                  static_cast<int64_t>(step)));
        }
        return py::cast(s.ptr(index.cast<int64_t>()));
      });
}

void bind_models(py::module_ models) {
  using ResNetFactory = nn::models::ResNet (*)(nn::models::ResNetOptions);
  const std::pair<const char*, ResNetFactory> resnets[] = {
      {"resnet18", &nn::models::resnet18},   {"resnet34", &nn::models::resnet34},
      {"resnet50", &nn::models::resnet50},   {"resnet101", &nn::models::resnet101},
      {"resnet152", &nn::models::resnet152},
  };
  for (const auto& [name, factory] : resnets) {
    models.def(
        name,
        [factory](int64_t num_classes, uint64_t seed, bool zero_init_residual) {
          py::gil_scoped_release release;
          return factory({num_classes, seed, zero_init_residual}).ptr();
        },
        py::kw_only(), py::arg("num_classes") = 1000, py::arg("seed") = 0,
        py::arg("zero_init_residual") = false);
  }
  models.def(
      "mlp",
      [](int64_t in_features, const std::vector<int64_t>& hidden_sizes, int64_t out_features,
         const std::string& activation, double dropout, bool bias, uint64_t seed) {
        return nn::models::mlp(in_features, hidden_sizes, out_features,
                               {activation, dropout, bias, seed})
            .ptr();
      },
      py::arg("in_features"), py::arg("hidden_sizes"), py::arg("out_features"), py::kw_only(),
      py::arg("activation") = "relu", py::arg("dropout") = 0.0, py::arg("bias") = true,
      py::arg("seed") = 0);

  py::class_<nn::models::BertModelImpl, Module, std::shared_ptr<nn::models::BertModelImpl>> bert(
      models, "BertModel");
  auto forward = [](nn::models::BertModelImpl& self, const Tensor& input_ids,
                    std::optional<Tensor> attention_mask, std::optional<Tensor> token_type_ids) {
    nn::models::BertOutput out;
    {
      py::gil_scoped_release release;
      out = self.forward(input_ids, attention_mask, token_type_ids);
    }
    return py::make_tuple(out.last_hidden_state,
                          out.pooler_output.defined() ? py::cast(out.pooler_output) : py::none());
  };
  bert.def("forward", forward, py::arg("input_ids"), py::arg("attention_mask") = py::none(),
           py::arg("token_type_ids") = py::none())
      .def("__call__", forward, py::arg("input_ids"), py::arg("attention_mask") = py::none(),
           py::arg("token_type_ids") = py::none());
  using nn::models::BertConfig;
  py::class_<BertConfig>(models, "BertConfig", "BERT's sizes and options (Hugging Face's names).")
      .def(py::init<>())
      .def_readwrite("vocab_size", &BertConfig::vocab_size)
      .def_readwrite("hidden_size", &BertConfig::hidden_size)
      .def_readwrite("num_hidden_layers", &BertConfig::num_hidden_layers)
      .def_readwrite("num_attention_heads", &BertConfig::num_attention_heads)
      .def_readwrite("intermediate_size", &BertConfig::intermediate_size)
      .def_readwrite("hidden_act", &BertConfig::hidden_act)
      .def_readwrite("hidden_dropout_prob", &BertConfig::hidden_dropout_prob)
      .def_readwrite("attention_probs_dropout_prob", &BertConfig::attention_probs_dropout_prob)
      .def_readwrite("max_position_embeddings", &BertConfig::max_position_embeddings)
      .def_readwrite("type_vocab_size", &BertConfig::type_vocab_size)
      .def_readwrite("initializer_range", &BertConfig::initializer_range)
      .def_readwrite("layer_norm_eps", &BertConfig::layer_norm_eps)
      .def_readwrite("pad_token_id", &BertConfig::pad_token_id)
      .def_readwrite("add_pooling_layer", &BertConfig::add_pooling_layer);
  models.def(
      "bert",
      [](std::optional<BertConfig> config, const py::kwargs& kwargs) {
        py::object c = py::cast(config.value_or(BertConfig{}));
        for (auto item : kwargs) {
          const auto key = item.first.cast<std::string>();
          if (key.starts_with("_") || !py::hasattr(c, key.c_str())) {
            throw py::type_error("bert(): unexpected keyword argument '" + key + "'");
          }
          py::setattr(c, key.c_str(), item.second);
        }
        const BertConfig resolved = c.cast<BertConfig>();
        py::gil_scoped_release release;
        return nn::models::bert(resolved).ptr();
      },
      py::arg("config") = py::none(),
      "BERT-base by default; a BertConfig, and keyword arguments setting its fields.");
}

void bind_functional(py::module_ f) {
  f.def(
      "linear",
      [](const Tensor& input, const Tensor& weight, std::optional<Tensor> bias) {
        py::gil_scoped_release release;
        return linear(input, weight, bias);
      },
      py::arg("input"), py::arg("weight"), py::arg("bias") = py::none());
  f.def(
      "conv2d",
      [](const Tensor& input, const Tensor& weight, std::optional<Tensor> bias,
         const py::object& stride, const py::object& padding, const py::object& dilation,
         int64_t groups) {
        const auto s = int_or_ints(stride), p = int_or_ints(padding), d = int_or_ints(dilation);
        py::gil_scoped_release release;
        return conv2d(input, weight, bias, s, p, d, groups);
      },
      py::arg("input"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("stride") = 1,
      py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("groups") = 1);
  f.def(
      "layer_norm",
      [](const Tensor& input, const py::object& normalized_shape, std::optional<Tensor> weight,
         std::optional<Tensor> bias, double eps) {
        const auto shape = int_or_ints(normalized_shape);
        py::gil_scoped_release release;
        return layer_norm(input, shape, weight, bias, eps);
      },
      py::arg("input"), py::arg("normalized_shape"), py::arg("weight") = py::none(),
      py::arg("bias") = py::none(), py::arg("eps") = 1e-5);
  f.def(
      "cross_entropy",
      [](const Tensor& input, const Tensor& target, std::optional<Tensor> weight,
         int64_t ignore_index, const std::string& reduction, double label_smoothing) {
        py::gil_scoped_release release;
        return cross_entropy(input, target, weight, reduction, ignore_index, label_smoothing);
      },
      py::arg("input"), py::arg("target"), py::arg("weight") = py::none(),
      py::arg("ignore_index") = -100, py::arg("reduction") = "mean",
      py::arg("label_smoothing") = 0.0);
  f.def(
      "mse_loss",
      [](const Tensor& input, const Tensor& target, const std::string& reduction) {
        py::gil_scoped_release release;
        return mse_loss(input, target, reduction);
      },
      py::arg("input"), py::arg("target"), py::arg("reduction") = "mean");
  f.def(
      "adaptive_avg_pool2d",
      [](const Tensor& input, const py::object& output_size) {
        const auto size = int_or_ints(output_size);
        py::gil_scoped_release release;
        return adaptive_avg_pool2d(input, size);
      },
      py::arg("input"), py::arg("output_size"));
}

}  // namespace

void bind_nn(py::module_& m) {
  py::module_ nn_m = m.def_submodule("_nn", "Modules, layers and the model zoo (torch.nn).");
  bind_module(nn_m);
  bind_layers(nn_m);
  bind_models(nn_m.def_submodule("models", "ResNet-18..152 (torchvision's), MLP, BERT."));
  bind_functional(nn_m.def_submodule("functional", "torch.nn.functional's operators."));
}

}  // namespace ferry::python
