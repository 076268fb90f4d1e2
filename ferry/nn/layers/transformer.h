// nn::TransformerEncoderLayer (torch::nn::TransformerEncoderLayer) with PyTorch's submodule names
// (self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2), post-norm by default
// or pre-norm with norm_first, relu or gelu in the feed-forward block. Same input layout rules
// as MultiheadAttention ([S, N, E], or [N, S, E] with batch_first).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ferry/core/tensor.h"
#include "ferry/nn/layers/activation.h"
#include "ferry/nn/layers/attention.h"
#include "ferry/nn/layers/layernorm.h"
#include "ferry/nn/layers/linear.h"
#include "ferry/nn/module.h"
#include "ferry/nn/module_holder.h"

namespace ferry::nn {

struct TransformerEncoderLayerOptions {
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  std::string activation = "relu";  // "relu" or "gelu"
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;
};

class TransformerEncoderLayerImpl : public Module {
 public:
  TransformerEncoderLayerImpl(int64_t d_model, int64_t nhead,
                              TransformerEncoderLayerOptions options = {});
  Tensor forward(const Tensor& src, const std::optional<Tensor>& src_mask = std::nullopt,
                 const std::optional<Tensor>& src_key_padding_mask = std::nullopt);

  TransformerEncoderLayerOptions options;
  MultiheadAttention self_attn{nullptr};
  Linear linear1{nullptr};
  Dropout dropout{nullptr};
  Linear linear2{nullptr};
  LayerNorm norm1{nullptr}, norm2{nullptr};
  Dropout dropout1{nullptr}, dropout2{nullptr};

 private:
  Tensor self_attention_block(const Tensor& x, const std::optional<Tensor>& mask,
                              const std::optional<Tensor>& key_padding_mask);
  Tensor feed_forward_block(const Tensor& x);
};
FERRY_MODULE(TransformerEncoderLayer);

}  // namespace ferry::nn
