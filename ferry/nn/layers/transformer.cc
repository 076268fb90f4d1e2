// nn::TransformerEncoderLayer: the attention and feed-forward blocks with residuals, post- or
// pre-norm (see transformer.h).
#include "ferry/nn/layers/transformer.h"

#include "ferry/core/error.h"
#include "ferry/ops/math.h"

namespace ferry::nn {

TransformerEncoderLayerImpl::TransformerEncoderLayerImpl(int64_t d_model, int64_t nhead,
                                                         TransformerEncoderLayerOptions opts)
    : options(std::move(opts)) {
  FERRY_CHECK(options.activation == "relu" || options.activation == "gelu",
              "TransformerEncoderLayer: activation should be relu or gelu, not ",
              options.activation);
  self_attn = register_module(
      "self_attn",
      MultiheadAttention(d_model, nhead,
                         MultiheadAttentionOptions{.dropout = options.dropout,
                                                   .batch_first = options.batch_first}));
  linear1 = register_module("linear1", Linear(d_model, options.dim_feedforward));
  dropout = register_module("dropout", Dropout(options.dropout));
  linear2 = register_module("linear2", Linear(options.dim_feedforward, d_model));
  norm1 =
      register_module("norm1", LayerNorm(std::vector<int64_t>{d_model}, options.layer_norm_eps));
  norm2 =
      register_module("norm2", LayerNorm(std::vector<int64_t>{d_model}, options.layer_norm_eps));
  dropout1 = register_module("dropout1", Dropout(options.dropout));
  dropout2 = register_module("dropout2", Dropout(options.dropout));
}

Tensor TransformerEncoderLayerImpl::self_attention_block(
    const Tensor& x, const std::optional<Tensor>& mask,
    const std::optional<Tensor>& key_padding_mask) {
  Tensor a = self_attn->forward(x, x, x, key_padding_mask, /*need_weights=*/false, mask).first;
  return dropout1(a);
}

Tensor TransformerEncoderLayerImpl::feed_forward_block(const Tensor& x) {
  Tensor h = linear1(x);
  h = options.activation == "gelu" ? gelu(h) : relu(h);
  return dropout2(linear2(dropout(h)));
}

Tensor TransformerEncoderLayerImpl::forward(const Tensor& src,
                                            const std::optional<Tensor>& src_mask,
                                            const std::optional<Tensor>& src_key_padding_mask) {
  Tensor x = src;
  if (options.norm_first) {
    x = x + self_attention_block(norm1(x), src_mask, src_key_padding_mask);
    x = x + feed_forward_block(norm2(x));
  } else {
    x = norm1(x + self_attention_block(x, src_mask, src_key_padding_mask));
    x = norm2(x + feed_forward_block(x));
  }
  return x;
}

}  // namespace ferry::nn
