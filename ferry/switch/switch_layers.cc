// Splitting zoo models into the layers a switch moves and runs (see switch_layers.h).
#include "ferry/switch/switch_layers.h"

#include <optional>
#include <unordered_set>
#include <utility>

#include "ferry/core/error.h"

namespace ferry::switch_ {
namespace {

template <typename Holder>
SwitchLayer layer_of(std::string name, const Holder& holder) {
  return {std::move(name), holder.ptr(),
          [module = holder.ptr()](const Tensor& x) { return Tensor(module->forward(x)); }};
}

void add_blocks(std::vector<SwitchLayer>& layers, const std::string& stage,
                const nn::Sequential& blocks) {
  const auto& items = blocks->items();
  for (size_t i = 0; i < items.size(); ++i) {
    layers.push_back({stage + "." + std::to_string(i), items[i].ptr(),
                      [block = items[i]](const Tensor& x) { return block.forward(x); }});
  }
}

}  // namespace

std::vector<SwitchLayer> switch_layers(const nn::models::ResNet& model) {
  FERRY_CHECK(!model.is_empty(), "switch_layers: expected a ResNet, got an empty holder");
  std::vector<SwitchLayer> layers;
  layers.push_back(layer_of("conv1", model->conv1));
  layers.push_back(layer_of("bn1", model->bn1));
  layers.push_back(layer_of("relu", model->relu));
  layers.push_back(layer_of("maxpool", model->maxpool));
  add_blocks(layers, "layer1", model->layer1);
  add_blocks(layers, "layer2", model->layer2);
  add_blocks(layers, "layer3", model->layer3);
  add_blocks(layers, "layer4", model->layer4);
  layers.push_back(
      {"avgpool", model->avgpool.ptr(),
       [pool = model->avgpool.ptr()](const Tensor& x) { return pool->forward(x).flatten(1); }});
  layers.push_back(layer_of("fc", model->fc));
  return layers;
}

std::vector<SwitchLayer> switch_layers(const nn::models::BertModel& model,
                                       std::shared_ptr<BertLayerInputs> inputs) {
  FERRY_CHECK(!model.is_empty(), "switch_layers: expected a BertModel, got an empty holder");
  if (inputs == nullptr) inputs = std::make_shared<BertLayerInputs>();
  std::vector<SwitchLayer> layers;
  layers.push_back({"embeddings", model->embeddings.ptr(),
                    [embeddings = model->embeddings.ptr(), inputs](const Tensor& ids) {
                      const Tensor& types = inputs->token_type_ids;
                      Tensor hidden = embeddings->forward(
                          ids, types.defined() ? std::optional<Tensor>(types) : std::nullopt);
                      inputs->extended_mask = inputs->attention_mask.defined()
                                                  ? nn::models::bert_extended_attention_mask(
                                                        inputs->attention_mask, ids, hidden.dtype())
                                                  : Tensor();
                      return hidden;
                    }});
  const nn::ModuleList& encoder_layers = model->encoder->layer;
  for (size_t i = 0; i < encoder_layers->size(); ++i) {
    auto layer = std::dynamic_pointer_cast<nn::models::BertLayerImpl>(
        encoder_layers->ptr(static_cast<int64_t>(i)));
    FERRY_CHECK(layer != nullptr, "switch_layers: encoder.layer.", i, " is not a BertLayer");
    layers.push_back(
        {"encoder.layer." + std::to_string(i), layer, [layer, inputs](const Tensor& hidden) {
           return layer->forward(hidden, inputs->extended_mask);
         }});
  }
  if (!model->pooler.is_empty()) {
    layers.push_back({"pooler", model->pooler.ptr(),
                      [pooler = model->pooler.ptr(), inputs](const Tensor& hidden) {
                        inputs->last_hidden_state = hidden;
                        return pooler->forward(hidden);
                      }});
  }
  return layers;
}

std::vector<SwitchLayer> switch_layers(const nn::Sequential& model) {
  FERRY_CHECK(!model.is_empty(), "switch_layers: expected a Sequential, got an empty holder");
  std::vector<SwitchLayer> layers;
  const auto children = model->named_children();
  const auto& items = model->items();
  for (size_t i = 0; i < items.size(); ++i) {
    layers.push_back({children[i].key(), items[i].ptr(),
                      [module = items[i]](const Tensor& x) { return module.forward(x); }});
  }
  return layers;
}

Tensor run_layers(const std::vector<SwitchLayer>& layers, const Tensor& input) {
  Tensor x = input;
  for (const SwitchLayer& layer : layers) x = layer.run(x);
  return x;
}

uint64_t weight_bytes(const nn::Module& module) {
  std::unordered_set<const TensorImpl*> seen;
  uint64_t bytes = 0;
  auto count = [&](const Tensor& t) {
    if (t.defined() && seen.insert(t.impl()).second) bytes += t.nbytes();
  };
  for (const auto& item : module.named_parameters()) count(item.value());
  for (const auto& item : module.named_buffers()) count(item.value());
  return bytes;
}

}  // namespace ferry::switch_
