// Zoo models by architecture name (see zoo_model.h).
#include "ferry/switch/zoo_model.h"

#include <sstream>

#include "ferry/core/error.h"
#include "ferry/core/generator.h"
#include "ferry/nn/models/bert.h"
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
  ZooModel zoo{arch, model.ptr(), switch_layers(model), shape};
  zoo.vocab_size = config.vocab_size;
  return zoo;
}

}  // namespace

Tensor ZooModel::example_input(Device device, uint64_t seed) const {
  Generator generator(seed);
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
  FERRY_CHECK(shape.batch >= 1, "make_zoo_model: expected a batch of at least 1, got ",
              shape.batch);
  FERRY_CHECK(shape.image_size >= 32, "make_zoo_model: expected an image size of at least 32, got ",
              shape.image_size);
  nn::models::ResNetOptions resnet;
  resnet.seed = seed;
  if (arch == "resnet18") return resnet_model(arch, nn::models::resnet18(resnet), shape);
  if (arch == "resnet34") return resnet_model(arch, nn::models::resnet34(resnet), shape);
  if (arch == "resnet50") return resnet_model(arch, nn::models::resnet50(resnet), shape);
  if (arch == "resnet101") return resnet_model(arch, nn::models::resnet101(resnet), shape);
  if (arch == "resnet152") return resnet_model(arch, nn::models::resnet152(resnet), shape);
  nn::models::BertConfig bert;
  bert.seed = seed;
  if (arch == "bert-base") return bert_model(arch, bert, shape);
  if (arch == "bert-tiny") {
    bert.hidden_size = 128;
    bert.num_hidden_layers = 2;
    bert.num_attention_heads = 2;
    bert.intermediate_size = 512;
    bert.vocab_size = 1000;
    return bert_model(arch, bert, shape);
  }
  std::ostringstream known;
  for (const std::string& name : zoo_architectures())
    known << (known.tellp() > 0 ? ", " : "") << name;
  FERRY_FAIL_AS(Error, "make_zoo_model: expected one of ", known.str(), "; got '", arch, "'");
}

}  // namespace ferry::switch_
