// nn::MultiheadAttention (torch::nn::MultiheadAttention) with PyTorch's parameter names:
// in_proj_weight [3E, E] (query, key, value rows stacked), in_proj_bias [3E], out_proj (a Linear
// printed as NonDynamicallyQuantizableLinear). Inputs are [L, N, E] or, with batch_first,
// [N, L, E]; masks follow PyTorch (bool: true = not allowed to attend; float: added to the
// scores). Init as PyTorch: Xavier-uniform in_proj_weight, zero biases. Attention dropout runs in
// training only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "ferry/core/tensor.h"
#include "ferry/nn/layers/linear.h"
#include "ferry/nn/module.h"
#include "ferry/nn/module_holder.h"

namespace ferry::nn {

struct MultiheadAttentionOptions {
  double dropout = 0.0;
  bool bias = true;
  bool batch_first = false;
};

class MultiheadAttentionImpl : public Module {
 public:
  // embed_dim divisible by num_heads (ferry::Error naming both otherwise).
  MultiheadAttentionImpl(int64_t embed_dim, int64_t num_heads,
                         MultiheadAttentionOptions options = {});
  void reset_parameters();

  // (attn_output of the query's shape, attention weights [N, L, S] averaged over heads, or
  // [N, num_heads, L, S] without averaging; undefined when need_weights is false).
  // key_padding_mask: [N, S]; attn_mask: [L, S] or [N * num_heads, L, S].
  std::pair<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const std::optional<Tensor>& key_padding_mask = std::nullopt,
                                    bool need_weights = true,
                                    const std::optional<Tensor>& attn_mask = std::nullopt,
                                    bool average_attn_weights = true);

  int64_t embed_dim, num_heads, head_dim;
  MultiheadAttentionOptions options;
  Tensor in_proj_weight, in_proj_bias;  // bias undefined without `bias`
  NonDynamicallyQuantizableLinear out_proj{nullptr};
};
FERRY_MODULE(MultiheadAttention);

// A mask as an additive float of `dtype` on `device`: bool true -> -inf, false -> 0; a float
// mask is returned cast to dtype.
Tensor additive_mask(const Tensor& mask, ScalarType dtype);

}  // namespace ferry::nn
