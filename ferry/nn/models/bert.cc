// BERT encoder: Hugging Face's BertModel structure on ferry::nn layers (see bert.h).
#include "ferry/nn/models/bert.h"

#include <cmath>
#include <limits>

#include "ferry/core/error.h"
#include "ferry/nn/layers/init.h"
#include "ferry/ops/factories.h"
#include "ferry/ops/linalg.h"
#include "ferry/ops/math.h"

namespace ferry::nn::models {
namespace {

std::vector<int64_t> one(int64_t n) { return {n}; }

}  // namespace

BertEmbeddingsImpl::BertEmbeddingsImpl(const BertConfig& c) {
  word_embeddings =
      register_module("word_embeddings", Embedding(c.vocab_size, c.hidden_size, c.pad_token_id));
  position_embeddings =
      register_module("position_embeddings", Embedding(c.max_position_embeddings, c.hidden_size));
  token_type_embeddings =
      register_module("token_type_embeddings", Embedding(c.type_vocab_size, c.hidden_size));
  layer_norm = register_module("LayerNorm", nn::LayerNorm(one(c.hidden_size), c.layer_norm_eps));
  dropout = register_module("dropout", Dropout(c.hidden_dropout_prob));
}

Tensor BertEmbeddingsImpl::forward(const Tensor& input_ids,
                                   const std::optional<Tensor>& token_type_ids) {
  FERRY_CHECK_AS(ShapeError, input_ids.dim() == 2,
                 "BertEmbeddings: expected input_ids of shape [B, S], given ", input_ids.sizes());
  const int64_t seq = input_ids.size(1);
  FERRY_CHECK_AS(ShapeError, seq <= position_embeddings->num_embeddings,
                 "BertEmbeddings: sequence length ", seq, " exceeds max_position_embeddings ",
                 position_embeddings->num_embeddings);
  const Tensor positions = arange(seq, TensorOptions(kInt64).device(input_ids.device()));
  const Tensor types =
      token_type_ids ? *token_type_ids : zeros(input_ids.sizes(), input_ids.options());
  Tensor x = word_embeddings(input_ids) + token_type_embeddings(types);
  x = x + position_embeddings(positions).unsqueeze(0);
  return dropout(layer_norm(x));
}

BertSelfAttentionImpl::BertSelfAttentionImpl(const BertConfig& c) {
  FERRY_CHECK(c.hidden_size % c.num_attention_heads == 0,
              "BertSelfAttention: hidden_size must be a multiple of num_attention_heads (given "
              "hidden_size=",
              c.hidden_size, ", num_attention_heads=", c.num_attention_heads, ")");
  num_heads = c.num_attention_heads;
  head_size = c.hidden_size / c.num_attention_heads;
  query = register_module("query", Linear(c.hidden_size, c.hidden_size));
  key = register_module("key", Linear(c.hidden_size, c.hidden_size));
  value = register_module("value", Linear(c.hidden_size, c.hidden_size));
  dropout = register_module("dropout", Dropout(c.attention_probs_dropout_prob));
}

Tensor BertSelfAttentionImpl::forward(const Tensor& hidden, const Tensor& mask) {
  const int64_t b = hidden.size(0), s = hidden.size(1);
  auto heads = [&](const Tensor& x) {  // [B, S, H] -> [B, heads, S, D]
    return x.view({b, s, num_heads, head_size}).permute({0, 2, 1, 3});
  };
  const Tensor q = heads(query(hidden)), k = heads(key(hidden)), v = heads(value(hidden));
  Tensor scores = matmul(q, k.transpose(-1, -2)).div(std::sqrt(static_cast<double>(head_size)));
  if (mask.defined()) scores = scores + mask;
  const Tensor probs = dropout(softmax(scores, -1));
  return matmul(probs, v).permute({0, 2, 1, 3}).reshape({b, s, num_heads * head_size});
}

BertResidualOutputImpl::BertResidualOutputImpl(int64_t in, const BertConfig& c, std::string name)
    : Module(std::move(name)) {
  dense = register_module("dense", Linear(in, c.hidden_size));
  layer_norm = register_module("LayerNorm", nn::LayerNorm(one(c.hidden_size), c.layer_norm_eps));
  dropout = register_module("dropout", Dropout(c.hidden_dropout_prob));
}

Tensor BertResidualOutputImpl::forward(const Tensor& x, const Tensor& residual) {
  return layer_norm(dropout(dense(x)) + residual);
}

BertAttentionImpl::BertAttentionImpl(const BertConfig& c) {
  self = register_module("self", BertSelfAttention(c));
  output = register_module("output", BertResidualOutput(c.hidden_size, c, "BertSelfOutput"));
}

Tensor BertAttentionImpl::forward(const Tensor& hidden, const Tensor& mask) {
  return output->forward(self->forward(hidden, mask), hidden);
}

BertIntermediateImpl::BertIntermediateImpl(const BertConfig& c) : hidden_act(c.hidden_act) {
  FERRY_CHECK(hidden_act == "gelu" || hidden_act == "gelu_new" || hidden_act == "relu",
              "BertIntermediate: expected hidden_act gelu, gelu_new or relu, given '", hidden_act,
              "'");
  dense = register_module("dense", Linear(c.hidden_size, c.intermediate_size));
}

Tensor BertIntermediateImpl::forward(const Tensor& x) {
  const Tensor h = dense(x);
  if (hidden_act == "relu") return relu(h);
  return gelu(h, hidden_act == "gelu_new" ? "tanh" : "none");
}

BertLayerImpl::BertLayerImpl(const BertConfig& c) {
  attention = register_module("attention", BertAttention(c));
  intermediate = register_module("intermediate", BertIntermediate(c));
  output = register_module("output", BertResidualOutput(c.intermediate_size, c, "BertOutput"));
}

Tensor BertLayerImpl::forward(const Tensor& hidden, const Tensor& mask) {
  const Tensor a = attention->forward(hidden, mask);
  return output->forward(intermediate(a), a);
}

BertEncoderImpl::BertEncoderImpl(const BertConfig& c) {
  layer = register_module("layer", ModuleList());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layer->push_back(BertLayer(c));
}

Tensor BertEncoderImpl::forward(const Tensor& hidden, const Tensor& mask) {
  Tensor x = hidden;
  for (size_t i = 0; i < layer->size(); ++i) {
    x = layer->at<BertLayerImpl>(static_cast<int64_t>(i)).forward(x, mask);
  }
  return x;
}

BertPoolerImpl::BertPoolerImpl(const BertConfig& c) {
  dense = register_module("dense", Linear(c.hidden_size, c.hidden_size));
}

Tensor BertPoolerImpl::forward(const Tensor& hidden) { return tanh(dense(hidden.select(1, 0))); }

BertModelImpl::BertModelImpl(BertConfig c) : config(std::move(c)) {
  init::InitSeed seed(config.seed);
  embeddings = register_module("embeddings", BertEmbeddings(config));
  encoder = register_module("encoder", BertEncoder(config));
  if (config.add_pooling_layer) pooler = register_module("pooler", BertPooler(config));
  // Hugging Face's _init_weights: linear and embedding weights normal(0, initializer_range),
  // biases and the padding row zero, LayerNorm weight 1 and bias 0 (the layer's own default).
  for (const auto& m : modules(/*include_self=*/false)) {
    if (auto* lin = dynamic_cast<LinearImpl*>(m.get())) {
      init::normal_(lin->weight, 0.0, config.initializer_range);
      if (lin->bias.defined()) init::zeros_(lin->bias);
    } else if (auto* emb = dynamic_cast<EmbeddingImpl*>(m.get())) {
      init::normal_(emb->weight, 0.0, config.initializer_range);
      emb->reset_padding_row();
    }
  }
}

Tensor bert_extended_attention_mask(const Tensor& attention_mask, const Tensor& input_ids,
                                    ScalarType dtype) {
  FERRY_CHECK_AS(ShapeError, attention_mask.sizes() == input_ids.sizes(),
                 "BertModel: expected attention_mask of the input_ids' shape ", input_ids.sizes(),
                 ", given ", attention_mask.sizes());
  // [B, S] 1/0 -> [B, 1, 1, S]: 0 where attended, the dtype's lowest value where padded.
  const double lowest = dtype == kFloat64    ? std::numeric_limits<double>::lowest()
                        : dtype == kFloat16  ? -65504.0
                        : dtype == kBFloat16 ? -3.3895313892515355e38
                                             : std::numeric_limits<float>::lowest();
  const Tensor m = attention_mask.to(dtype);
  return m.neg().add(1.0).mul(lowest).unsqueeze(1).unsqueeze(1);
}

BertOutput BertModelImpl::forward(const Tensor& input_ids,
                                  const std::optional<Tensor>& attention_mask,
                                  const std::optional<Tensor>& token_type_ids) {
  const Tensor hidden = embeddings->forward(input_ids, token_type_ids);
  const Tensor mask = attention_mask
                          ? bert_extended_attention_mask(*attention_mask, input_ids, hidden.dtype())
                          : Tensor();
  BertOutput out;
  out.last_hidden_state = encoder->forward(hidden, mask);
  if (pooler) out.pooler_output = pooler(out.last_hidden_state);
  return out;
}

BertModel bert(BertConfig config) { return BertModel(std::move(config)); }

}  // namespace ferry::nn::models
