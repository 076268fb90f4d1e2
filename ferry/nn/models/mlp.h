// A multi-layer perceptron as a Sequential (so a pipeline can split it): Linear, activation
// [, Dropout] for each hidden size, then a final Linear; modules named "0", "1", ... in that
// order (torchvision.ops.MLP's layout without its trailing dropout). Deterministic for a seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/nn/layers/container.h"

namespace ferry::nn::models {

struct MLPOptions {
  std::string activation = "relu";  // "relu" or "gelu"
  double dropout = 0.0;             // a Dropout after each activation when > 0
  bool bias = true;
  uint64_t seed = 0;
};

// in_features -> hidden_sizes... -> out_features.
Sequential mlp(int64_t in_features, const std::vector<int64_t>& hidden_sizes, int64_t out_features,
               MLPOptions options = {});

}  // namespace ferry::nn::models
