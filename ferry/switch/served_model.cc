// The model zoo's models wrapped for serving (served_model.h).
#include "ferry/switch/served_model.h"

#include <algorithm>
#include <sstream>

#include "ferry/autograd/grad_mode.h"
#include "ferry/nn/models.h"

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

class MlpModel : public ServedModel {
 public:
  MlpModel(const ModelConfig& c) {
    nn::models::MLPOptions options;
    options.activation = c.activation;
    options.seed = c.seed;
    net_ = nn::models::mlp(c.in_features, c.hidden, c.out_features, options);
    module_ = net_.ptr();
    inputs_ = {{"x", kFloat32, {-1, c.in_features}}};
  }
  std::vector<NamedTensor> run(const std::vector<Tensor>& in) override {
    return {{"y", net_->forward(in[0])}};
  }

 private:
  nn::Sequential net_{nullptr};
};

class ResNetModel : public ServedModel {
 public:
  ResNetModel(const ModelConfig& c) {
    nn::models::ResNetOptions options;
    options.num_classes = c.num_classes;
    options.seed = c.seed;
    const std::string& a = c.arch;
    net_ = a == "resnet18"    ? nn::models::resnet18(options)
           : a == "resnet34"  ? nn::models::resnet34(options)
           : a == "resnet50"  ? nn::models::resnet50(options)
           : a == "resnet101" ? nn::models::resnet101(options)
                              : nn::models::resnet152(options);
    module_ = net_.ptr();
    inputs_ = {{"x", kFloat32, {-1, 3, -1, -1}}};
  }
  std::vector<NamedTensor> run(const std::vector<Tensor>& in) override {
    return {{"logits", net_->forward(in[0])}};
  }

 private:
  nn::models::ResNet net_{nullptr};
};

class BertServedModel : public ServedModel {
 public:
  BertServedModel(const ModelConfig& c) {
    nn::models::BertConfig config = c.arch == "bert-base" ? nn::models::BertConfig{} : c.bert;
    config.seed = c.seed;
    net_ = nn::models::bert(config);
    module_ = net_.ptr();
    inputs_ = {{"input_ids", kInt64, {-1, -1}},
               {"attention_mask", kInt64, {-1, -1}, true},
               {"token_type_ids", kInt64, {-1, -1}, true}};
  }
  std::vector<NamedTensor> run(const std::vector<Tensor>& in) override {
    const auto opt = [](const Tensor& t) {
      return t.defined() ? std::optional<Tensor>(t) : std::nullopt;
    };
    nn::models::BertOutput out = net_->forward(in[0], opt(in[1]), opt(in[2]));
    std::vector<NamedTensor> outputs = {{"last_hidden_state", out.last_hidden_state}};
    if (out.pooler_output.defined()) outputs.push_back({"pooler_output", out.pooler_output});
    return outputs;
  }
  void check_values(const std::string& model, const std::vector<Tensor>& in) const override {
    const auto& cfg = net_->config;
    const Tensor& ids = in[0];
    if (ids.size(0) < 1 || ids.size(1) < 1 || ids.size(1) > cfg.max_position_embeddings) {
      bad_input(detail::str_cat("model '", model, "' input 'input_ids': expected [batch >= 1, ",
                                "1 <= sequence <= ", cfg.max_position_embeddings, "], but got [",
                                ids.size(0), ", ", ids.size(1), "]"));
    }
    const auto in_range = [&](const Tensor& t, const char* name, int64_t limit) {
      if (!t.defined()) return;
      if (t.sizes().vec() != ids.sizes().vec()) {
        bad_input(detail::str_cat("model '", model, "' input '", name,
                                  "': expected the shape of input_ids, ",
                                  describe(kInt64, ids.sizes().vec()), ", but got ",
                                  describe(t.dtype(), t.sizes().vec())));
      }
      const Tensor c = t.contiguous();
      const int64_t* p = c.data_ptr<int64_t>();
      for (int64_t i = 0; i < c.numel(); ++i) {
        if (p[i] < 0 || p[i] >= limit) {
          bad_input(detail::str_cat("model '", model, "' input '", name,
                                    "': expected values in [0, ", limit, "), but element ", i,
                                    " is ", p[i]));
        }
      }
    };
    in_range(ids, "input_ids", cfg.vocab_size);
    in_range(in[1], "attention_mask", 2);
    in_range(in[2], "token_type_ids", cfg.type_vocab_size);
  }

 private:
  nn::models::BertModel net_{nullptr};
};

}  // namespace

std::vector<Tensor> ServedModel::match_inputs(const std::string& model,
                                              const std::vector<NamedTensor>& given) const {
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

std::unique_ptr<ServedModel> build_served_model(const ModelConfig& config, Device device) {
  std::unique_ptr<ServedModel> model;
  if (config.arch == "mlp") {
    model = std::make_unique<MlpModel>(config);
  } else if (config.arch.rfind("resnet", 0) == 0) {
    model = std::make_unique<ResNetModel>(config);
  } else if (config.arch == "bert" || config.arch == "bert-base") {
    model = std::make_unique<BertServedModel>(config);
  } else {
    throw ConfigError(
        detail::str_cat("model '", config.name, "': unknown arch \"", config.arch, "\""));
  }
  if (!config.weights.empty()) {
    model->module().load(config.weights, device, /*strict=*/true);
  }
  model->module().to(device);
  model->module().eval();
  model->device_ = device;
  return model;
}

}  // namespace ferry::switch_
