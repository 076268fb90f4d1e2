// The parameter and buffer shapes of real models, under their reference names, for benchmarks
// that need a model's tensor population without its layers: torchvision's ResNet-152 (467
// parameters, 465 batch-norm buffers, 60,192,808 parameter elements) and Hugging Face's
// BertModel for bert-base (199 parameters, the position_ids buffer, 109,482,240 elements).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ferry/core/scalar_type.h"
#include "ferry/nn/module.h"

namespace ferry::bench {

struct TensorShape {
  std::string name;  // dotted, e.g. "layer1.0.conv1.weight"
  std::vector<int64_t> shape;
  ScalarType dtype = kFloat32;
  bool buffer = false;
};

std::vector<TensorShape> resnet152_shapes();
std::vector<TensorShape> bert_base_shapes();

// A plain module tree with those names: one child per dotted component, each tensor registered
// (random floats, zero integers) as a parameter or a persistent buffer.
std::shared_ptr<nn::Module> module_from_shapes(const std::vector<TensorShape>& shapes);

}  // namespace ferry::bench
