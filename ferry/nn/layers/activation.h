// Stateless layers: nn::ReLU, nn::GELU, nn::Dropout and nn::Flatten (torch::nn's), with
// PyTorch's reprs ("ReLU(inplace=True)", "GELU(approximate='none')", "Dropout(p=0.1,
// inplace=False)", "Flatten(start_dim=1, end_dim=-1)"). Dropout is active only in training
// (and with p > 0); its mask comes from the default generator.
#pragma once

#include <cstdint>
#include <string>

#include "ferry/core/tensor.h"
#include "ferry/nn/module.h"
#include "ferry/nn/module_holder.h"

namespace ferry::nn {

class ReLUImpl : public Module {
 public:
  // inplace: forward overwrites its input (as PyTorch's, an error on a leaf that requires grad).
  explicit ReLUImpl(bool inplace = false) : inplace(inplace) {}
  Tensor forward(const Tensor& input);
  std::string extra_repr() const override { return inplace ? "inplace=True" : ""; }
  bool inplace;
};
FERRY_MODULE(ReLU);

class GELUImpl : public Module {
 public:
  // approximate: "none" (erf) or "tanh".
  explicit GELUImpl(std::string approximate = "none");
  Tensor forward(const Tensor& input);
  std::string extra_repr() const override { return "approximate='" + approximate + "'"; }
  std::string approximate;
};
FERRY_MODULE(GELU);

class DropoutImpl : public Module {
 public:
  // p in [0, 1] (ferry::Error naming it otherwise).
  explicit DropoutImpl(double p = 0.5, bool inplace = false);
  Tensor forward(const Tensor& input);
  std::string extra_repr() const override;
  double p;
  bool inplace;
};
FERRY_MODULE(Dropout);

class FlattenImpl : public Module {
 public:
  explicit FlattenImpl(int64_t start_dim = 1, int64_t end_dim = -1)
      : start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& input) { return input.flatten(start_dim, end_dim); }
  std::string extra_repr() const override {
    return "start_dim=" + std::to_string(start_dim) + ", end_dim=" + std::to_string(end_dim);
  }
  int64_t start_dim, end_dim;
};
FERRY_MODULE(Flatten);

}  // namespace ferry::nn
