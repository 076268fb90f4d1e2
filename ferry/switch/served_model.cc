// The model zoo's models wrapped for serving (served_model.h).
#include "ferry/switch/served_model.h"

#include <algorithm>
#include <optional>
#include <sstream>

#include "ferry/nn/layers/init.h"
#include "ferry/nn/models/bert.h"

namespace ferry::switch_ {
namespace {

std::string describe(ScalarType dtype, const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << dtype_name(dtype) << " [";
  for (size_t i = 0; i < shape.size(); ++i) {
    out << (i ? ", " : "");
    if (shape[i] < 0) {
      out << "*";
    } else {
      out << shape[i];
    }
  }
  out << "]";
  return out.str();
}

[[noreturn]] void bad_input(const std::string& message) {
  throw SwitchError(ErrorCode::bad_input, message);
}

}  // namespace

std::vector<Tensor> ServedModel::match_inputs(const std::vector<NamedTensor>& given) const {
  const std::string& model = name_;
  std::vector<Tensor> matched(inputs_.size());
  std::string expected_names;
  for (const auto& spec : inputs_) {
    expected_names +=
        (expected_names.empty() ? "" : ", ") + spec.name + (spec.optional ? " (optional)" : "");
  }
  if (inputs_.size() == 1) {
    if (given.size() != 1) {
      bad_input(detail::str_cat("model '", model, "': expected 1 input tensor (",
                                describe(inputs_[0].dtype, inputs_[0].shape), "), but got ",
                                given.size()));
    }
    matched[0] = given[0].tensor;
  } else {
    for (const NamedTensor& g : given) {
      auto it = std::find_if(inputs_.begin(), inputs_.end(),
                             [&](const InputSpec& s) { return s.name == g.name; });
      if (it == inputs_.end()) {
        bad_input(detail::str_cat("model '", model, "': unknown input '", g.name,
                                  "' (expected inputs: ", expected_names, ")"));
      }
      Tensor& slot = matched[static_cast<size_t>(it - inputs_.begin())];
      if (slot.defined()) {
        bad_input(detail::str_cat("model '", model, "': input '", g.name, "' given twice"));
      }
      slot = g.tensor;
    }
  }
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const InputSpec& spec = inputs_[i];
    const Tensor& t = matched[i];
    if (!t.defined()) {
      if (spec.optional) continue;
      bad_input(detail::str_cat("model '", model, "': missing input '", spec.name, "' (",
                                describe(spec.dtype, spec.shape),
                                "; expected inputs: ", expected_names, ")"));
    }
    bool ok = t.dtype() == spec.dtype && t.dim() == static_cast<int64_t>(spec.shape.size());
    for (size_t d = 0; ok && d < spec.shape.size(); ++d) {
      ok = spec.shape[d] < 0 || spec.shape[d] == t.size(static_cast<int64_t>(d));
    }
    if (!ok) {
      bad_input(detail::str_cat("model '", model, "' input '", spec.name, "': expected ",
                                describe(spec.dtype, spec.shape), ", but got ",
                                describe(t.dtype(), t.sizes().vec())));
    }
  }
  return matched;
}

namespace {

ZooOptions zoo_options_of(const ModelConfig& c, ZooInputShape shape) {
  ZooOptions o;
  o.seed = c.seed;
  o.shape = shape;
  o.num_classes = c.num_classes;
  o.bert = c.bert;
  o.mlp_in_features = c.in_features;
  o.mlp_hidden = c.hidden;
  o.mlp_out_features = c.out_features;
  o.mlp_activation = c.activation;
  return o;
}

std::vector<InputSpec> input_specs_of(const ModelConfig& c) {
  if (c.arch == "mlp") return {{"x", kFloat32, {-1, c.in_features}}};
  if (c.arch.rfind("resnet", 0) == 0) return {{"x", kFloat32, {-1, 3, -1, -1}}};
  return {{"input_ids", kInt64, {-1, -1}},
          {"attention_mask", kInt64, {-1, -1}, true},
          {"token_type_ids", kInt64, {-1, -1}, true}};
}

}  // namespace

ServedModel::ServedModel(const ModelConfig& config, ZooInputShape example_shape)
    : name_(config.name) {
  // A strict load overwrites every parameter and buffer: no point drawing random ones first.
  build(config, example_shape, /*random_init=*/config.weights.empty());
  if (!config.weights.empty()) zoo_.module->load(config.weights, Device(kCPU), /*strict=*/true);
  image_ = std::make_unique<ModelImage>(zoo_.layers);
}

ServedModel::ServedModel(const ModelConfig& config, ZooInputShape example_shape,
                         const Tensor& image_bytes, uint64_t image_fingerprint)
    : name_(config.name) {
  build(config, example_shape, /*random_init=*/false);
  image_ = ModelImage::adopt(zoo_.layers, image_bytes, image_fingerprint);
}

ServedModel::ServedModel(const ModelConfig& config, ZooInputShape example_shape,
                         const ImageSource& source)
    : name_(config.name) {
  build(config, example_shape, /*random_init=*/false);
  const ModelImage::Layout layout = ModelImage::layout_of(zoo_.layers);
  const Tensor bytes = layout.nbytes != 0 && source ? source(layout) : Tensor();
  if (bytes.defined()) {
    image_ = ModelImage::adopt(zoo_.layers, bytes, layout.fingerprint);
    return;
  }
  if (config.weights.empty()) {
    build(config, example_shape, /*random_init=*/true);  // the seeded weights after all
  } else {
    zoo_.module->load(config.weights, Device(kCPU), /*strict=*/true);
  }
  image_ = std::make_unique<ModelImage>(zoo_.layers);
}

void ServedModel::build(const ModelConfig& config, ZooInputShape example_shape, bool random_init) {
  std::optional<nn::init::SkipRandomInit> skip;
  if (!random_init) skip.emplace();
  if (config.arch != "mlp" && config.arch != "bert" && config.arch != "bert-base" &&
      config.arch.rfind("resnet", 0) != 0) {
    throw ConfigError(
        detail::str_cat("model '", config.name, "': unknown arch \"", config.arch, "\""));
  }
  zoo_ = make_zoo_model(config.arch, zoo_options_of(config, example_shape));
  inputs_ = input_specs_of(config);
  zoo_.module->eval();
}

void ServedModel::check_values(const std::vector<Tensor>& in) const {
  if (!zoo_.bert_inputs) return;
  const std::string& model = name_;
  const auto& cfg = std::static_pointer_cast<nn::models::BertModelImpl>(zoo_.module)->config;
  const Tensor& ids = in[0];
  if (ids.size(0) < 1 || ids.size(1) < 1 || ids.size(1) > cfg.max_position_embeddings) {
    bad_input(detail::str_cat("model '", model, "' input 'input_ids': expected [batch >= 1, ",
                              "1 <= sequence <= ", cfg.max_position_embeddings, "], but got [",
                              ids.size(0), ", ", ids.size(1), "]"));
  }
  const auto in_range = [&](const Tensor& t, const char* name, int64_t limit) {
    if (!t.defined()) return;
    if (t.sizes().vec() != ids.sizes().vec()) {
      bad_input(detail::str_cat(
          "model '", model, "' input '", name, "': expected the shape of input_ids, ",
          describe(kInt64, ids.sizes().vec()), ", but got ", describe(t.dtype(), t.sizes().vec())));
    }
    const Tensor c = t.contiguous();
    const int64_t* p = c.data_ptr<int64_t>();
    for (int64_t i = 0; i < c.numel(); ++i) {
      if (p[i] < 0 || p[i] >= limit) {
        bad_input(detail::str_cat("model '", model, "' input '", name, "': expected values in [0, ",
                                  limit, "), but element ", i, " is ", p[i]));
      }
    }
  };
  in_range(ids, "input_ids", cfg.vocab_size);
  in_range(in[1], "attention_mask", 2);
  in_range(in[2], "token_type_ids", cfg.type_vocab_size);
}

Tensor ServedModel::begin_run(const std::vector<Tensor>& device_inputs) {
  if (zoo_.bert_inputs) {
    zoo_.bert_inputs->attention_mask = device_inputs[1];
    zoo_.bert_inputs->token_type_ids = device_inputs[2];
  }
  return device_inputs[0];
}

std::vector<NamedTensor> ServedModel::end_run(const Tensor& output) {
  if (!zoo_.bert_inputs) {
    return {{zoo_.mlp_in_features > 0 ? "y" : "logits", output}};
  }
  BertLayerInputs& state = *zoo_.bert_inputs;
  std::vector<NamedTensor> outputs;
  if (state.last_hidden_state.defined()) {
    outputs = {{"last_hidden_state", state.last_hidden_state}, {"pooler_output", output}};
  } else {
    outputs = {{"last_hidden_state", output}};
  }
  state = BertLayerInputs{};
  return outputs;
}

std::vector<NamedTensor> ServedModel::run(const std::vector<Tensor>& device_inputs) {
  return end_run(run_layers(zoo_.layers, begin_run(device_inputs)));
}

}  // namespace ferry::switch_
