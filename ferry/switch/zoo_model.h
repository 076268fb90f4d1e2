// Zoo models by architecture name, as the switch serves and plans them: the module, its switch
// layers (switch_layers.h) and a random example input of the shape it takes. One place maps a
// name ("resnet50", "bert-base") to a model, for the server's configuration, explain-switch and
// the switch bench alike.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/core/tensor.h"
#include "ferry/nn/models/bert.h"
#include "ferry/nn/module.h"
#include "ferry/switch/switch_layers.h"

namespace ferry::switch_ {

struct ZooInputShape {
  int64_t batch = 8;
  int64_t image_size = 224;  // ResNets: [batch, 3, image_size, image_size] float32
  int64_t seq_len = 128;     // BERTs: [batch, seq_len] int64 token ids
};

struct ZooModel {
  std::string arch;
  std::shared_ptr<nn::Module> module;
  std::vector<SwitchLayer> layers;
  ZooInputShape input_shape;
  // BERTs only: the vocabulary the example ids are drawn from, and the inputs and output the
  // layers share besides the hidden state (switch_layers.h).
  int64_t vocab_size = 0;
  std::shared_ptr<BertLayerInputs> bert_inputs;
  // MLPs only: the width of the example input [batch, mlp_in_features].
  int64_t mlp_in_features = 0;

  // A random input of input_shape on `device`, from `seed`.
  Tensor example_input(Device device, uint64_t seed = 0) const;
};

// The architecture names make_zoo_model knows: resnet18/34/50/101/152, bert-base, and bert-tiny
// (2 layers of width 128: for tests).
const std::vector<std::string>& zoo_architectures();

// Everything a served model's configuration may set (models.toml): the named architectures
// above, plus "mlp" (in_features -> hidden... -> out_features) and "bert" (BERT with `bert`'s
// sizes). Fields an architecture does not use are ignored.
struct ZooOptions {
  uint64_t seed = 0;
  ZooInputShape shape;
  int64_t num_classes = 1000;   // resnets
  nn::models::BertConfig bert;  // "bert"
  int64_t mlp_in_features = 0;  // "mlp"
  std::vector<int64_t> mlp_hidden;
  int64_t mlp_out_features = 0;
  std::string mlp_activation = "relu";
};
ZooModel make_zoo_model(const std::string& arch, const ZooOptions& options);

// Builds `arch` (weights initialised from `seed`) in eval mode, on the CPU. Raises ferry::Error
// naming the known architectures when `arch` is not one of them.
ZooModel make_zoo_model(const std::string& arch, uint64_t seed = 0, ZooInputShape shape = {});

}  // namespace ferry::switch_
