// Unit tests of the nn layers and model builders: output shapes, parameter and buffer names (as
// PyTorch's), printing (PyTorch's repr, checked against torch 1.13's output), Sequential indexing
// and slicing, train/eval behaviour, deterministic init, errors, and gradients reaching every
// parameter. Random inputs come from the printed test seed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "ferry/ferry.h"
#include "ferry/nn/layers.h"
#include "ferry/nn/layers/repr.h"
#include "ferry/nn/models.h"
#include "tests/support/errors.h"
#include "tests/support/random.h"
#include "tests/support/tensor_compare.h"

namespace ferry::testing {
namespace {

template <typename M>
std::string repr_of(const M& module) {
  std::ostringstream s;
  s << *module;
  return s.str();
}

std::vector<std::string> keys_of(const nn::OrderedDict<std::string, Tensor>& d) {
  std::vector<std::string> out;
  for (const auto& item : d) out.push_back(item.key());
  return out;
}

// A float32 input of `sizes` drawn from the test's seed.
Tensor random_input(std::vector<int64_t> sizes) {
  Generator gen(test_seed());
  return randn(sizes, {}, &gen);
}

TEST(ReprTest, FloatsPrintAsPython) {
  EXPECT_EQ(nn::repr::py_float(1e-5), "1e-05");
  EXPECT_EQ(nn::repr::py_float(1e-12), "1e-12");
  EXPECT_EQ(nn::repr::py_float(0.1), "0.1");
  EXPECT_EQ(nn::repr::py_float(0.0), "0.0");
  EXPECT_EQ(nn::repr::py_float(1.0), "1.0");
  EXPECT_EQ(nn::repr::py_float(0.0001), "0.0001");
  EXPECT_EQ(nn::repr::py_float(123.25), "123.25");
  EXPECT_EQ(nn::repr::py_float(1e16), "1e+16");
  EXPECT_EQ(nn::repr::py_float(-2.5e-7), "-2.5e-07");
  EXPECT_EQ(nn::repr::py_tuple({64}), "(64,)");
  EXPECT_EQ(nn::repr::py_tuple({3, 3}), "(3, 3)");
}

TEST(LayersTest, ReprMatchesPyTorch) {
  EXPECT_EQ(repr_of(nn::Linear(3, 4)), "Linear(in_features=3, out_features=4, bias=True)");
  EXPECT_EQ(repr_of(nn::Conv2d(nn::Conv2dOptions{.in_channels = 3,
                                                 .out_channels = 64,
                                                 .kernel_size = {7},
                                                 .stride = {2},
                                                 .padding = {3},
                                                 .bias = false})),
            "Conv2d(3, 64, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False)");
  EXPECT_EQ(
      repr_of(nn::Conv2d(nn::Conv2dOptions{
          .in_channels = 4, .out_channels = 8, .kernel_size = {3}, .dilation = {2}, .groups = 2})),
      "Conv2d(4, 8, kernel_size=(3, 3), stride=(1, 1), dilation=(2, 2), groups=2)");
  EXPECT_EQ(repr_of(nn::BatchNorm2d(64)),
            "BatchNorm2d(64, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)");
  EXPECT_EQ(repr_of(nn::LayerNorm(std::vector<int64_t>{64})),
            "LayerNorm((64,), eps=1e-05, elementwise_affine=True)");
  EXPECT_EQ(repr_of(nn::LayerNorm(std::vector<int64_t>{4, 5}, 1e-12)),
            "LayerNorm((4, 5), eps=1e-12, elementwise_affine=True)");
  EXPECT_EQ(repr_of(nn::Embedding(10, 3, 0)), "Embedding(10, 3, padding_idx=0)");
  EXPECT_EQ(repr_of(nn::Dropout(0.1)), "Dropout(p=0.1, inplace=False)");
  EXPECT_EQ(repr_of(nn::ReLU()), "ReLU()");
  EXPECT_EQ(repr_of(nn::ReLU(true)), "ReLU(inplace=True)");
  EXPECT_EQ(repr_of(nn::GELU()), "GELU(approximate='none')");
  EXPECT_EQ(repr_of(nn::MaxPool2d(
                nn::MaxPool2dOptions{.kernel_size = {3}, .stride = {2}, .padding = {1}})),
            "MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=False)");
  EXPECT_EQ(repr_of(nn::AdaptiveAvgPool2d(std::vector<int64_t>{1, 1})),
            "AdaptiveAvgPool2d(output_size=(1, 1))");
  EXPECT_EQ(repr_of(nn::Flatten()), "Flatten(start_dim=1, end_dim=-1)");
  EXPECT_EQ(
      repr_of(nn::Sequential(nn::Linear(2, 3), nn::ReLU())),
      "Sequential(\n  (0): Linear(in_features=2, out_features=3, bias=True)\n  (1): ReLU()\n)");
  EXPECT_EQ(repr_of(nn::MultiheadAttention(8, 2)),
            "MultiheadAttention(\n  (out_proj): NonDynamicallyQuantizableLinear(in_features=8, "
            "out_features=8, bias=True)\n)");
}

TEST(LayersTest, ShapesAndNames) {
  SCOPED_TRACE(seed_trace());
  nn::Linear lin(5, 3);
  EXPECT_EQ(keys_of(lin->named_parameters()), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(lin(random_input({2, 7, 5})).sizes(), IntArrayRef({2, 7, 3}));
  EXPECT_EQ(keys_of(nn::Linear(5, 3, false)->named_parameters()),
            std::vector<std::string>{"weight"});

  nn::Conv2d conv(nn::Conv2dOptions{
      .in_channels = 3, .out_channels = 8, .kernel_size = {3}, .stride = {2}, .padding = {1}});
  EXPECT_EQ(conv(random_input({2, 3, 9, 9})).sizes(), IntArrayRef({2, 8, 5, 5}));
  EXPECT_EQ(conv->weight.sizes(), IntArrayRef({8, 3, 3, 3}));

  nn::BatchNorm2d bn(8);
  EXPECT_EQ(keys_of(bn->state_dict()),
            (std::vector<std::string>{"weight", "bias", "running_mean", "running_var",
                                      "num_batches_tracked"}));
  EXPECT_EQ(bn->num_batches_tracked.dtype(), kInt64);

  nn::Embedding emb(10, 4, 0);
  const Tensor ids = arange(6, kInt64).view({2, 3});
  EXPECT_EQ(emb(ids).sizes(), IntArrayRef({2, 3, 4}));
  EXPECT_EQ(emb->weight.select(0, 0).abs().sum().item<double>(), 0.0);  // padding row

  nn::MaxPool2d pool(nn::MaxPool2dOptions{.kernel_size = {3}, .stride = {2}, .padding = {1}});
  EXPECT_EQ(pool(random_input({1, 2, 8, 8})).sizes(), IntArrayRef({1, 2, 4, 4}));
  nn::AdaptiveAvgPool2d avg(std::vector<int64_t>{1, 1});
  EXPECT_EQ(nn::Flatten()(avg(random_input({2, 6, 5, 5}))).sizes(), IntArrayRef({2, 6}));

  nn::MultiheadAttention mha(16, 4, nn::MultiheadAttentionOptions{.batch_first = true});
  EXPECT_EQ(keys_of(mha->named_parameters()),
            (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight",
                                      "out_proj.bias"}));
  const Tensor q = random_input({2, 5, 16});
  auto [out, weights] = mha->forward(q, q, q);
  EXPECT_EQ(out.sizes(), IntArrayRef({2, 5, 16}));
  EXPECT_EQ(weights.sizes(), IntArrayRef({2, 5, 5}));
  EXPECT_ALL_CLOSE(weights.sum({-1}), ones({2, 5}), 1e-5, 1e-6);

  nn::TransformerEncoderLayer tel(16, 4, nn::TransformerEncoderLayerOptions{.dim_feedforward = 32});
  EXPECT_EQ(keys_of(tel->named_parameters()),
            (std::vector<std::string>{
                "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
                "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"}));
  EXPECT_EQ(tel(random_input({5, 2, 16})).sizes(), IntArrayRef({5, 2, 16}));
}

TEST(LayersTest, BatchNormCountsTrainingBatchesOnly) {
  SCOPED_TRACE(seed_trace());
  nn::BatchNorm2d bn(3);
  const Tensor x = random_input({4, 3, 5, 5});
  bn(x);
  bn(x);
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 2);
  // running_mean = (1 - 0.1)^2 * 0 + ... : after two identical batches, 0.19 * batch mean.
  EXPECT_ALL_CLOSE(bn->running_mean, x.mean({0, 2, 3}).mul(0.19), 1e-5, 1e-6);
  bn->eval();
  const Tensor y = bn(x);
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 2);
  EXPECT_ALL_CLOSE(y,
                   x.sub(bn->running_mean.view({1, 3, 1, 1}))
                       .div(bn->running_var.add(1e-5).sqrt().view({1, 3, 1, 1})),
                   1e-5, 1e-5);
  EXPECT_THAT(error_of<ShapeError>([&] {
                bn(random_input({4, 3, 5}));
              }),
              ::testing::HasSubstr("BatchNorm2d: expected 4D input (got 3D input)"));
}

TEST(LayersTest, DropoutOnlyInTraining) {
  SCOPED_TRACE(seed_trace());
  nn::Dropout drop(0.5);
  const Tensor x = ones({1000});
  const double kept = drop(x).ne(0.0).sum().item<double>();
  EXPECT_GT(kept, 350);
  EXPECT_LT(kept, 650);
  drop->eval();
  EXPECT_ALL_CLOSE(drop(x), x);
  EXPECT_THROW(nn::Dropout(1.5), Error);
}

TEST(SequentialTest, ChainsIndexesAndSlicesSharingModules) {
  SCOPED_TRACE(seed_trace());
  nn::Sequential seq(nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 2));
  const Tensor x = random_input({3, 4});
  const Tensor y = seq(x);
  EXPECT_EQ(y.sizes(), IntArrayRef({3, 2}));
  EXPECT_EQ(seq->size(), 3u);
  EXPECT_EQ(seq[-1], seq[2]);
  EXPECT_EQ(seq->at<nn::LinearImpl>(2).out_features, 2);
  EXPECT_THROW(seq->at<nn::LinearImpl>(1), Error);
  EXPECT_THAT(error_of<IndexError>([&] { seq[3]; }),
              ::testing::HasSubstr("Sequential: index 3 is out of range (expected in [-3, 3))"));

  nn::Sequential head = seq.slice(0, 2);
  nn::Sequential tail = seq.slice(2, 3);
  EXPECT_EQ(head->size(), 2u);
  EXPECT_EQ(head[0], seq[0]);  // the same module object
  EXPECT_EQ(keys_of(tail->named_parameters()), (std::vector<std::string>{"2.weight", "2.bias"}));
  EXPECT_ALL_CLOSE(tail(head(x)), y);
  // A change through the slice is a change of the original.
  {
    NoGradGuard no_grad;
    tail->at<nn::LinearImpl>(0).bias.add_(1.0);
  }
  EXPECT_ALL_CLOSE(seq(x), y + 1.0, 1e-6, 1e-6);
  EXPECT_EQ(seq.slice(-2, 100)->size(), 2u);
  EXPECT_EQ(seq.slice(0, 3, 2)->size(), 2u);
  EXPECT_EQ(nn::Sequential()->size(), 0u);
  // A slice keeps the original's mode and leaves the shared modules' modes alone.
  seq->eval();
  seq[0]->train();
  nn::Sequential evaluating = seq.slice(0, 2);
  EXPECT_FALSE(evaluating->is_training());
  EXPECT_TRUE(seq[0]->is_training());
  EXPECT_FALSE(seq[1]->is_training());
}

TEST(ModuleListTest, HoldsAnyModules) {
  nn::ModuleList list(nn::Linear(2, 3), nn::BatchNorm2d(3));
  list->push_back(nn::ReLU());
  EXPECT_EQ(list->size(), 3u);
  EXPECT_EQ(list[1]->name(), "BatchNorm2d");
  EXPECT_EQ(keys_of(list->named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"}));
}

// Every parameter gets a gradient from a scalar loss.
void expect_all_grads(nn::Module& m) {
  for (const auto& item : m.named_parameters()) {
    SCOPED_TRACE(item.key());
    ASSERT_TRUE(item->grad().defined());
    EXPECT_EQ(item->grad().sizes(), item->sizes());
  }
}

TEST(LayersTest, GradientsReachEveryParameter) {
  SCOPED_TRACE(seed_trace());
  nn::Sequential net(
      nn::Conv2d(nn::Conv2dOptions{.in_channels = 3, .out_channels = 4, .kernel_size = {3}}),
      nn::BatchNorm2d(4), nn::ReLU(), nn::MaxPool2d(nn::MaxPool2dOptions{.kernel_size = {2}}),
      nn::AdaptiveAvgPool2d(std::vector<int64_t>{1, 1}), nn::Flatten(), nn::Linear(4, 2));
  net(random_input({2, 3, 8, 8})).sum().backward();
  expect_all_grads(*net);

  nn::TransformerEncoderLayer tel(
      8, 2,
      nn::TransformerEncoderLayerOptions{
          .dim_feedforward = 16, .activation = "gelu", .norm_first = true});
  tel(random_input({3, 2, 8})).pow(2).sum().backward();
  expect_all_grads(*tel);

  nn::Embedding emb(10, 4);
  nn::LayerNorm norm(std::vector<int64_t>{4});
  norm(emb(arange(5, kInt64))).pow(2).sum().backward();
  expect_all_grads(*emb);
  expect_all_grads(*norm);
}

TEST(ModelsTest, ResNetHasTorchvisionNames) {
  auto r18 = nn::models::resnet18();
  EXPECT_EQ(r18->parameters().size(), 62u);  // as torchvision's
  const auto state = r18->state_dict();
  EXPECT_EQ(state.size(), 122u);
  for (const char* k :
       {"conv1.weight", "bn1.running_var", "layer1.0.conv1.weight", "layer2.0.downsample.0.weight",
        "layer2.0.downsample.1.num_batches_tracked", "layer4.1.bn2.bias", "fc.weight", "fc.bias"}) {
    EXPECT_TRUE(state.contains(k)) << k;
  }
  auto r50 = nn::models::resnet50(nn::models::ResNetOptions{.num_classes = 10});
  EXPECT_EQ(r50->parameters().size(), 161u);
  EXPECT_EQ(r50->state_dict().size(), 320u);
  EXPECT_EQ(r50->fc->weight.sizes(), IntArrayRef({10, 2048}));
  EXPECT_TRUE(r50->state_dict().contains("layer3.5.conv3.weight"));
  r50->eval();  // a 1x1 map of one sample has no batch statistics
  EXPECT_EQ(r50(random_input({1, 3, 32, 32})).sizes(), IntArrayRef({1, 10}));
  std::ostringstream s;
  s << *r18->layer2;
  const std::string expected_start =
      "Sequential(\n  (0): BasicBlock(\n    (conv1): Conv2d(64, 128, kernel_size=(3, 3), "
      "stride=(2, 2), padding=(1, 1), bias=False)\n    (bn1)";
  EXPECT_EQ(s.str().substr(0, expected_start.size()), expected_start);
}

TEST(ModelsTest, InitIsDeterministicForASeed) {
  auto a = nn::models::resnet18(nn::models::ResNetOptions{.num_classes = 4, .seed = 7});
  auto b = nn::models::resnet18(nn::models::ResNetOptions{.num_classes = 4, .seed = 7});
  auto c = nn::models::resnet18(nn::models::ResNetOptions{.num_classes = 4, .seed = 8});
  EXPECT_ALL_CLOSE(a->conv1->weight, b->conv1->weight, 0.0, 0.0);
  EXPECT_ALL_CLOSE(a->fc->bias, b->fc->bias, 0.0, 0.0);
  EXPECT_FALSE(all_close(a->conv1->weight, c->conv1->weight));
  // Kaiming normal, fan_out = 64 * 7 * 7: std sqrt(2 / 3136).
  const double std = a->conv1->weight.pow(2).mean().sqrt().item<double>();
  EXPECT_NEAR(std, std::sqrt(2.0 / 3136.0), 0.002);
}

TEST(ModelsTest, SkipRandomInitFillsNothingAndDrawsNothing) {
  {
    nn::init::SkipRandomInit skip;
    nn::init::SkipRandomInit nested;
    auto skipped = nn::models::resnet18(nn::models::ResNetOptions{.num_classes = 4, .seed = 7});
    EXPECT_EQ(skipped->named_parameters().size(), 62u);
    // Constant schemes still fill (BatchNorm's running statistics and weight).
    for (const auto& item : skipped->named_buffers()) {
      const double expected = item.key().ends_with("running_var") ? 1.0 : 0.0;
      EXPECT_ALL_CLOSE(item.value(), full_like(item.value(), expected), 0.0, 0.0) << item.key();
    }
    EXPECT_ALL_CLOSE(skipped->bn1->weight, ones({64}), 0.0, 0.0);
    Tensor marked = full({8}, 7.0);
    Tensor matrix = marked.view({2, 4});
    nn::init::kaiming_uniform_(matrix);
    nn::init::normal_(marked);
    EXPECT_ALL_CLOSE(marked, full({8}, 7.0), 0.0, 0.0);
  }
  // Under a seed, a skipped draw takes nothing from the generator, and the scheme draws again
  // once the guard ends.
  Tensor skipped = zeros({8}), drawn = empty({8}), expected = empty({8});
  {
    nn::init::InitSeed seed(5);
    {
      nn::init::SkipRandomInit skip;
      nn::init::normal_(skipped);
    }
    nn::init::normal_(drawn);
  }
  {
    nn::init::InitSeed seed(5);
    nn::init::normal_(expected);
  }
  EXPECT_EQ(skipped.abs().sum().item<double>(), 0.0);
  EXPECT_ALL_CLOSE(drawn, expected, 0.0, 0.0);
  EXPECT_GT(drawn.abs().sum().item<double>(), 0.0);
}

TEST(ModelsTest, BertHasHuggingFaceNames) {
  SCOPED_TRACE(seed_trace());
  auto net = nn::models::bert(nn::models::BertConfig{.vocab_size = 50,
                                                     .hidden_size = 32,
                                                     .num_hidden_layers = 2,
                                                     .num_attention_heads = 4,
                                                     .intermediate_size = 64,
                                                     .max_position_embeddings = 16});
  const auto state = net->state_dict();
  for (const char* k :
       {"embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
        "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight",
        "encoder.layer.0.attention.self.query.weight", "encoder.layer.1.attention.self.value.bias",
        "encoder.layer.0.attention.output.dense.weight",
        "encoder.layer.0.attention.output.LayerNorm.bias",
        "encoder.layer.1.intermediate.dense.weight", "encoder.layer.1.output.dense.weight",
        "encoder.layer.1.output.LayerNorm.weight", "pooler.dense.weight"}) {
    EXPECT_TRUE(state.contains(k)) << k;
  }
  EXPECT_EQ(state.size(), 5u + 2 * 16 + 2);
  Generator gen(test_seed());
  const Tensor ids = randint(1, 50, {2, 7}, kInt64, &gen);
  const auto out = net->forward(ids);
  EXPECT_EQ(out.last_hidden_state.sizes(), IntArrayRef({2, 7, 32}));
  EXPECT_EQ(out.pooler_output.sizes(), IntArrayRef({2, 32}));
  out.pooler_output.sum().backward();
  EXPECT_TRUE(net->encoder->layer->at<nn::models::BertLayerImpl>(0)
                  .attention->self->query->weight.grad()
                  .defined());
}

TEST(ModelsTest, MlpIsASequential) {
  SCOPED_TRACE(seed_trace());
  nn::Sequential net = nn::models::mlp(6, {16, 8}, 3, nn::models::MLPOptions{.dropout = 0.1});
  EXPECT_EQ(net->size(), 7u);  // Linear ReLU Dropout Linear ReLU Dropout Linear
  EXPECT_EQ(
      keys_of(net->named_parameters()),
      (std::vector<std::string>{"0.weight", "0.bias", "3.weight", "3.bias", "6.weight", "6.bias"}));
  net->eval();
  EXPECT_EQ(net(random_input({4, 6})).sizes(), IntArrayRef({4, 3}));
}

}  // namespace
}  // namespace ferry::testing
