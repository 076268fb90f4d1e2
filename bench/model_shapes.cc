// ResNet-152 and BERT-base shape lists, built the way torchvision and Hugging Face build the
// models, and a module tree made from such a list.
#include "bench/model_shapes.h"

#include "ferry/ops/factories.h"

namespace ferry::bench {
namespace {

void batch_norm(std::vector<TensorShape>& out, const std::string& prefix, int64_t c) {
  out.push_back({prefix + ".weight", {c}});
  out.push_back({prefix + ".bias", {c}});
  out.push_back({prefix + ".running_mean", {c}, kFloat32, true});
  out.push_back({prefix + ".running_var", {c}, kFloat32, true});
  out.push_back({prefix + ".num_batches_tracked", {}, kInt64, true});
}

void linear(std::vector<TensorShape>& out, const std::string& prefix, int64_t in, int64_t o) {
  out.push_back({prefix + ".weight", {o, in}});
  out.push_back({prefix + ".bias", {o}});
}

void layer_norm(std::vector<TensorShape>& out, const std::string& prefix, int64_t c) {
  out.push_back({prefix + ".weight", {c}});
  out.push_back({prefix + ".bias", {c}});
}

}  // namespace

std::vector<TensorShape> resnet152_shapes() {
  std::vector<TensorShape> out;
  out.push_back({"conv1.weight", {64, 3, 7, 7}});
  batch_norm(out, "bn1", 64);
  int64_t inplanes = 64;
  const int64_t blocks[4] = {3, 8, 36, 3};
  for (int layer = 0; layer < 4; ++layer) {
    const int64_t planes = int64_t{64} << layer;
    for (int64_t b = 0; b < blocks[layer]; ++b) {
      const std::string p = "layer" + std::to_string(layer + 1) + "." + std::to_string(b);
      out.push_back({p + ".conv1.weight", {planes, inplanes, 1, 1}});
      batch_norm(out, p + ".bn1", planes);
      out.push_back({p + ".conv2.weight", {planes, planes, 3, 3}});
      batch_norm(out, p + ".bn2", planes);
      out.push_back({p + ".conv3.weight", {planes * 4, planes, 1, 1}});
      batch_norm(out, p + ".bn3", planes * 4);
      if (b == 0) {
        out.push_back({p + ".downsample.0.weight", {planes * 4, inplanes, 1, 1}});
        batch_norm(out, p + ".downsample.1", planes * 4);
      }
      inplanes = planes * 4;
    }
  }
  linear(out, "fc", 2048, 1000);
  return out;
}

std::vector<TensorShape> bert_base_shapes() {
  const int64_t h = 768, ff = 3072;
  std::vector<TensorShape> out;
  out.push_back({"embeddings.word_embeddings.weight", {30522, h}});
  out.push_back({"embeddings.position_embeddings.weight", {512, h}});
  out.push_back({"embeddings.token_type_embeddings.weight", {2, h}});
  layer_norm(out, "embeddings.LayerNorm", h);
  out.push_back({"embeddings.position_ids", {1, 512}, kInt64, true});
  for (int i = 0; i < 12; ++i) {
    const std::string p = "encoder.layer." + std::to_string(i);
    linear(out, p + ".attention.self.query", h, h);
    linear(out, p + ".attention.self.key", h, h);
    linear(out, p + ".attention.self.value", h, h);
    linear(out, p + ".attention.output.dense", h, h);
    layer_norm(out, p + ".attention.output.LayerNorm", h);
    linear(out, p + ".intermediate.dense", h, ff);
    linear(out, p + ".output.dense", ff, h);
    layer_norm(out, p + ".output.LayerNorm", h);
  }
  linear(out, "pooler.dense", h, h);
  return out;
}

std::shared_ptr<nn::Module> module_from_shapes(const std::vector<TensorShape>& shapes) {
  auto root = std::make_shared<nn::Module>("Model");
  for (const TensorShape& s : shapes) {
    nn::Module* m = root.get();
    size_t start = 0;
    for (size_t dot = s.name.find('.'); dot != std::string::npos; dot = s.name.find('.', start)) {
      const std::string part = s.name.substr(start, dot - start);
      auto children = m->named_children();
      if (const auto* child = children.find(part)) {
        m = child->get();
      } else {
        m = m->register_module(part, std::make_shared<nn::Module>("Module")).get();
      }
      start = dot + 1;
    }
    const std::string leaf = s.name.substr(start);
    Tensor t = is_floating_point(s.dtype) ? randn(s.shape, TensorOptions(s.dtype))
                                          : zeros(s.shape, TensorOptions(s.dtype));
    if (s.buffer) {
      m->register_buffer(leaf, t);
    } else {
      m->register_parameter(leaf, t);
    }
  }
  return root;
}

}  // namespace ferry::bench
