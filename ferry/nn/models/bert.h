// A BERT encoder (BertModel) with Hugging Face's structure and parameter names: embeddings.
// {word,position,token_type}_embeddings and embeddings.LayerNorm; encoder.layer.N.attention.self.
// {query,key,value}, attention.output.{dense,LayerNorm}, intermediate.dense, output.{dense,
// LayerNorm}; pooler.dense. Post-norm layers, GELU (erf) by default, absolute positions, an
// additive attention mask from a [B, S] 0/1 mask. Init as Hugging Face's (normal(0, 0.02) for
// linear and embedding weights, zero biases and padding row, LayerNorm 1/0), deterministic for
// a seed. BertConfig's defaults are BERT-base; a small config builds a small model for tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ferry/core/tensor.h"
#include "ferry/nn/layers/activation.h"
#include "ferry/nn/layers/container.h"
#include "ferry/nn/layers/embedding.h"
#include "ferry/nn/layers/layernorm.h"
#include "ferry/nn/layers/linear.h"
#include "ferry/nn/module.h"
#include "ferry/nn/module_holder.h"

namespace ferry::nn::models {

struct BertConfig {
  int64_t vocab_size = 30522;
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  std::string hidden_act = "gelu";  // "gelu", "gelu_new" (tanh approximation) or "relu"
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  double initializer_range = 0.02;
  double layer_norm_eps = 1e-12;
  int64_t pad_token_id = 0;
  bool add_pooling_layer = true;
  uint64_t seed = 0;  // the init generator's seed
};

class BertEmbeddingsImpl : public Module {
 public:
  explicit BertEmbeddingsImpl(const BertConfig& config);
  // input_ids [B, S] (int64); token_type_ids [B, S] (zeros when absent) -> [B, S, hidden].
  Tensor forward(const Tensor& input_ids, const std::optional<Tensor>& token_type_ids);
  Embedding word_embeddings{nullptr}, position_embeddings{nullptr}, token_type_embeddings{nullptr};
  nn::LayerNorm layer_norm{nullptr};  // registered as "LayerNorm" (Hugging Face's name)
  Dropout dropout{nullptr};
};
FERRY_MODULE(BertEmbeddings);

class BertSelfAttentionImpl : public Module {
 public:
  explicit BertSelfAttentionImpl(const BertConfig& config);
  // hidden [B, S, H]; mask additive, broadcastable to [B, heads, S, S] (or undefined).
  Tensor forward(const Tensor& hidden, const Tensor& mask);
  int64_t num_heads, head_size;
  Linear query{nullptr}, key{nullptr}, value{nullptr};
  Dropout dropout{nullptr};
};
FERRY_MODULE(BertSelfAttention);

// dense, dropout, then LayerNorm(x + residual): BertSelfOutput and BertOutput.
class BertResidualOutputImpl : public Module {
 public:
  BertResidualOutputImpl(int64_t in, const BertConfig& config, std::string name);
  Tensor forward(const Tensor& x, const Tensor& residual);
  Linear dense{nullptr};
  nn::LayerNorm layer_norm{nullptr};  // registered as "LayerNorm" (Hugging Face's name)
  Dropout dropout{nullptr};
};
FERRY_MODULE(BertResidualOutput);

class BertAttentionImpl : public Module {
 public:
  explicit BertAttentionImpl(const BertConfig& config);
  Tensor forward(const Tensor& hidden, const Tensor& mask);
  BertSelfAttention self{nullptr};
  BertResidualOutput output{nullptr};
};
FERRY_MODULE(BertAttention);

class BertIntermediateImpl : public Module {
 public:
  explicit BertIntermediateImpl(const BertConfig& config);
  Tensor forward(const Tensor& x);
  std::string hidden_act;
  Linear dense{nullptr};
};
FERRY_MODULE(BertIntermediate);

class BertLayerImpl : public Module {
 public:
  explicit BertLayerImpl(const BertConfig& config);
  Tensor forward(const Tensor& hidden, const Tensor& mask);
  BertAttention attention{nullptr};
  BertIntermediate intermediate{nullptr};
  BertResidualOutput output{nullptr};
};
FERRY_MODULE(BertLayer);

class BertEncoderImpl : public Module {
 public:
  explicit BertEncoderImpl(const BertConfig& config);
  Tensor forward(const Tensor& hidden, const Tensor& mask);
  ModuleList layer{nullptr};
};
FERRY_MODULE(BertEncoder);

class BertPoolerImpl : public Module {
 public:
  explicit BertPoolerImpl(const BertConfig& config);
  // tanh(dense(hidden[:, 0])).
  Tensor forward(const Tensor& hidden);
  Linear dense{nullptr};
};
FERRY_MODULE(BertPooler);

// The additive mask BertModel::forward applies: attention_mask [B, S] of 0/1 (input_ids' shape,
// else ShapeError) -> [B, 1, 1, S] of `dtype`, 0 where attended and the dtype's lowest value
// where padded. Shared with the switch's BERT layers so both compute it identically.
Tensor bert_extended_attention_mask(const Tensor& attention_mask, const Tensor& input_ids,
                                    ScalarType dtype);

struct BertOutput {
  Tensor last_hidden_state;  // [B, S, hidden]
  Tensor pooler_output;      // [B, hidden]; undefined without the pooling layer
};

class BertModelImpl : public Module {
 public:
  explicit BertModelImpl(BertConfig config = {});
  // input_ids [B, S] int64; attention_mask [B, S] (1 attend, 0 padding; all ones when absent);
  // token_type_ids [B, S] (zeros when absent).
  BertOutput forward(const Tensor& input_ids,
                     const std::optional<Tensor>& attention_mask = std::nullopt,
                     const std::optional<Tensor>& token_type_ids = std::nullopt);
  BertConfig config;
  BertEmbeddings embeddings{nullptr};
  BertEncoder encoder{nullptr};
  BertPooler pooler{nullptr};
};
FERRY_MODULE(BertModel);

// BERT-base (the defaults) or any config.
BertModel bert(BertConfig config = {});

}  // namespace ferry::nn::models
