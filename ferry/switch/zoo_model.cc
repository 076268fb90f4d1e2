// Zoo models by architecture name (see zoo_model.h).
#include "ferry/switch/zoo_model.h"

#include <algorithm>
#include <sstream>

#include "ferry/core/error.h"
#include "ferry/core/generator.h"
#include "ferry/nn/models/bert.h"
#include "ferry/nn/models/mlp.h"
#include "ferry/nn/models/resnet.h"
#include "ferry/ops/factories.h"

namespace ferry::switch_ {
namespace {

ZooModel resnet_model(const std::string& arch, nn::models::ResNet model, ZooInputShape shape) {
  model->eval();
  ZooModel zoo{arch, model.ptr(), switch_layers(model), shape};
  return zoo;
}

ZooModel bert_model(const std::string& arch, nn::models::BertConfig config, ZooInputShape shape) {
  FERRY_CHECK(shape.seq_len >= 1 && shape.seq_len <= config.max_position_embeddings,
              "make_zoo_model: expected a sequence length in [1, ", config.max_position_embeddings,
              "] for ", arch, ", got ", shape.seq_len);
  nn::models::BertModel model = nn::models::bert(config);
  model->eval();
  auto inputs = std::make_shared<BertLayerInputs>();
  ZooModel zoo{arch, model.ptr(), switch_layers(model, inputs), shape};
  zoo.vocab_size = config.vocab_size;
  zoo.bert_inputs = std::move(inputs);
  return zoo;
}

}  // namespace

Tensor ZooModel::example_input(Device device, uint64_t seed) const {
  Generator generator(seed);
  if (mlp_in_features > 0) {
    return randn({input_shape.batch, mlp_in_features}, TensorOptions().dtype(kFloat32), &generator)
        .to(device);
  }
  if (vocab_size > 0) {
    return randint(vocab_size, {input_shape.batch, input_shape.seq_len},
                   TensorOptions().dtype(kInt64), &generator)
        .to(device);
  }
  return randn({input_shape.batch, 3, input_shape.image_size, input_shape.image_size},
               TensorOptions().dtype(kFloat32), &generator)
      .to(device);
}

const std::vector<std::string>& zoo_architectures() {
  static const std::vector<std::string> names = {"resnet18",  "resnet34",  "resnet50", "resnet101",
                                                 "resnet152", "bert-base", "bert-tiny"};
  return names;
}

ZooModel make_zoo_model(const std::string& arch, uint64_t seed, ZooInputShape shape) {
  ZooOptions options;
  options.seed = seed;
  options.shape = shape;
  return make_zoo_model(arch, options);
}

ZooModel make_zoo_model(const std::string& arch, const ZooOptions& options) {
  const ZooInputShape& shape = options.shape;
  FERRY_CHECK(shape.batch >= 1, "make_zoo_model: expected a batch of at least 1, got ",
              shape.batch);
  FERRY_CHECK(shape.image_size >= 32, "make_zoo_model: expected an image size of at least 32, got ",
              shape.image_size);
  nn::models::ResNetOptions resnet;
  resnet.seed = options.seed;
  resnet.num_classes = options.num_classes;
  if (arch == "resnet18") return resnet_model(arch, nn::models::resnet18(resnet), shape);
  if (arch == "resnet34") return resnet_model(arch, nn::models::resnet34(resnet), shape);
  if (arch == "resnet50") return resnet_model(arch, nn::models::resnet50(resnet), shape);
  if (arch == "resnet101") return resnet_model(arch, nn::models::resnet101(resnet), shape);
  if (arch == "resnet152") return resnet_model(arch, nn::models::resnet152(resnet), shape);
  nn::models::BertConfig bert;
  bert.seed = options.seed;
  if (arch == "bert-base") return bert_model(arch, bert, shape);
  if (arch == "bert-tiny") {
    bert.hidden_size = 128;
    bert.num_hidden_layers = 2;
    bert.num_attention_heads = 2;
    bert.intermediate_size = 512;
    bert.vocab_size = 1000;
    return bert_model(arch, bert, shape);
  }
  if (arch == "bert") {
    bert = options.bert;
    bert.seed = options.seed;
    ZooInputShape clamped = shape;
    clamped.seq_len = std::min(shape.seq_len, bert.max_position_embeddings);
    return bert_model(arch, bert, clamped);
  }
  if (arch == "mlp") {
    FERRY_CHECK(options.mlp_in_features >= 1 && options.mlp_out_features >= 1,
                "make_zoo_model: expected mlp in_features and out_features of at least 1, got ",
                options.mlp_in_features, " and ", options.mlp_out_features);
    nn::models::MLPOptions mlp;
    mlp.activation = options.mlp_activation;
    mlp.seed = options.seed;
    nn::Sequential model =
        nn::models::mlp(options.mlp_in_features, options.mlp_hidden, options.mlp_out_features, mlp);
    model->eval();
    ZooModel zoo{arch, model.ptr(), switch_layers(model), shape};
    zoo.mlp_in_features = options.mlp_in_features;
    return zoo;
  }
  std::ostringstream known;
  for (const std::string& name : zoo_architectures())
    known << (known.tellp() > 0 ? ", " : "") << name;
  FERRY_FAIL_AS(Error, "make_zoo_model: expected one of ", known.str(), ", mlp or bert; got '",
                arch, "'");
}

}  // namespace ferry::switch_
