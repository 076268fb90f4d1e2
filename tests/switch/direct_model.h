// Models for the switching tests and the references they are checked against: kSwitchModels
// (MLPs, a small BERT and a small ResNet), each model built directly from the model zoo's
// constructors and run on sim:0 (DirectModel, no serving code involved), and random requests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ferry/ferry.h"
#include "ferry/nn/models.h"
#include "ferry/switch/client.h"
#include "ferry/switch/model_config.h"
#include "ferry/switch/served_model.h"
#include "ferry/switch/types.h"
#include "tests/switch/switch_test_util.h"

namespace ferry::switch_::testing {

// Three MLPs of one size (a, b, c), a wider one, a small BERT and a small ResNet.
inline const char* kSwitchModels = R"(
[models.a]
arch = "mlp"
in_features = 16
hidden = [64]
out_features = 4
seed = 1

[models.b]
arch = "mlp"
in_features = 16
hidden = [64]
out_features = 4
seed = 2

[models.c]
arch = "mlp"
in_features = 16
hidden = [64]
out_features = 4
seed = 3

[models.wide]
arch = "mlp"
in_features = 16
hidden = [256, 64]
out_features = 4
seed = 4

[models.text]
arch = "bert"
vocab_size = 50
hidden_size = 32
num_hidden_layers = 2
num_attention_heads = 2
intermediate_size = 64
max_position_embeddings = 16
seed = 5

[models.vision]
arch = "resnet18"
num_classes = 10
seed = 6
)";

// Only the named models of kSwitchModels.
inline ServeConfig switch_config(const std::vector<std::string>& names) {
  ServeConfig all = parse_models_toml(kSwitchModels, "/");
  ServeConfig some;
  for (const ModelConfig& m : all.models) {
    if (std::find(names.begin(), names.end(), m.name) != names.end()) some.models.push_back(m);
  }
  return some;
}

inline uint64_t bytes_of(const std::string& name) {
  return ServedModel(switch_config({name}).models.at(0)).weight_bytes();
}

// The model of `config` built directly from the model zoo's constructors and run on sim:0.
class DirectModel {
 public:
  explicit DirectModel(const ModelConfig& c) : arch_(c.arch) {
    if (c.arch == "mlp") {
      nn::models::MLPOptions o;
      o.seed = c.seed;
      mlp_ = nn::models::mlp(c.in_features, c.hidden, c.out_features, o);
      mlp_->to(Device("sim:0"));
      mlp_->eval();
    } else if (c.arch == "resnet18") {
      nn::models::ResNetOptions o;
      o.num_classes = c.num_classes;
      o.seed = c.seed;
      resnet_ = nn::models::resnet18(o);
      resnet_->to(Device("sim:0"));
      resnet_->eval();
    } else {
      nn::models::BertConfig b = c.bert;
      b.seed = c.seed;
      bert_ = nn::models::bert(b);
      bert_->to(Device("sim:0"));
      bert_->eval();
    }
  }
  std::vector<Tensor> run(const std::vector<NamedTensor>& inputs) {
    autograd::NoGradGuard no_grad;
    const Device sim0("sim:0");
    std::vector<Tensor> out;
    if (arch_ == "mlp") {
      out = {mlp_->forward(inputs.at(0).tensor.to(sim0))};
    } else if (arch_ == "resnet18") {
      out = {resnet_->forward(inputs.at(0).tensor.to(sim0))};
    } else {
      std::optional<Tensor> mask, types;
      for (size_t i = 1; i < inputs.size(); ++i) {
        (inputs[i].name == "attention_mask" ? mask : types) = inputs[i].tensor.to(sim0);
      }
      nn::models::BertOutput o = bert_->forward(inputs.at(0).tensor.to(sim0), mask, types);
      out = {o.last_hidden_state, o.pooler_output};
    }
    for (Tensor& t : out) t = t.cpu().contiguous();
    return out;
  }

 private:
  std::string arch_;
  nn::Sequential mlp_{nullptr};
  nn::models::ResNet resnet_{nullptr};
  nn::models::BertModel bert_{nullptr};
};

// A random request for model `c`.
inline std::vector<NamedTensor> request_for(const ModelConfig& c, Generator& gen) {
  if (c.arch == "mlp") return {{"x", randn({2, c.in_features}, TensorOptions(), &gen)}};
  if (c.arch == "resnet18") return {{"x", randn({1, 3, 32, 32}, TensorOptions(), &gen)}};
  const TensorOptions ids(kInt64);
  Tensor mask = ones({2, 8}, ids);
  mask.narrow(1, 5, 3).fill_(0);  // the last three positions are padding
  return {{"input_ids", randint(c.bert.vocab_size, {2, 8}, ids, &gen)},
          {"attention_mask", mask},
          {"token_type_ids", randint(2, {2, 8}, ids, &gen)}};
}

// What both serving fixtures share: the served configuration, and checking a served answer
// bitwise against the directly built model (one DirectModel per model, shared by client threads).
class DirectOutputs {
 public:
  const ModelConfig& model(const std::string& name) const {
    for (const ModelConfig& m : config.models) {
      if (m.name == name) return m;
    }
    throw Error("no model " + name);
  }
  // Sends a random request for `name` and expects the direct model's outputs, bitwise.
  void expect_direct_outputs(Client& client, const std::string& name, Generator& gen) {
    const std::vector<NamedTensor> inputs = request_for(model(name), gen);
    const InferResult r = client.infer(name, inputs);
    std::vector<Tensor> expected;
    {
      std::lock_guard lock(direct_mutex);
      auto& direct = direct_models[name];
      if (!direct) direct = std::make_unique<DirectModel>(model(name));
      expected = direct->run(inputs);
    }
    ASSERT_EQ(r.outputs.size(), expected.size()) << name;
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_TRUE(same_tensor(r.outputs[i].tensor, expected[i])) << name << " output " << i;
    }
  }

  ServeConfig config;

 private:
  std::mutex direct_mutex;
  std::map<std::string, std::unique_ptr<DirectModel>> direct_models;
};

}  // namespace ferry::switch_::testing
