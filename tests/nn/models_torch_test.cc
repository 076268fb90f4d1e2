// The models and layers against code no one here wrote: tests/nn/models_reference.py (run with
// Debian's /usr/bin/python3) builds torchvision's resnet18/resnet50, torch.nn's
// TransformerEncoderLayer and MultiheadAttention, and a Hugging-Face-shaped BERT with random
// weights and saves weights, inputs and outputs as safetensors; ferry loads the weights by name
// (strict) and must give the same outputs: float32 to rtol 1e-4, bfloat16 loosely, in eval and in
// train mode (batch statistics, running-statistics update, every parameter's gradient), on the CPU
// and on sim:0. Skipped with a message when torch/torchvision are missing, unless
// FERRY_REQUIRE_TORCH=1 (CI), then failed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ferry/ferry.h"
#include "ferry/nn/layers.h"
#include "ferry/nn/models.h"
#include "ferry/nn/safetensors.h"
#include "tests/nn/safetensors_test_util.h"
#include "tests/support/random.h"
#include "tests/support/tensor_compare.h"

#ifndef FERRY_MODELS_REFERENCE_SCRIPT
#error "FERRY_MODELS_REFERENCE_SCRIPT (models_reference.py's path) must be defined by CMake"
#endif

namespace ferry::testing {
namespace {

constexpr const char* kPython = "/usr/bin/python3";

// Runs the reference script once per process; "" when torch is unavailable.
const std::string& reference_dir() {
  static const std::string dir = []() -> std::string {
    if (::access(kPython, X_OK) != 0) return "";
    const std::string probe =
        std::string(kPython) + " -c 'import torch, torchvision' > /dev/null 2>&1";
    if (std::system(probe.c_str()) != 0) return "";
    const std::string out = scratch_dir() + "/models-reference";
    std::filesystem::create_directories(out);
    const uint64_t seed = base_seed() % 1000003;
    std::printf("models_reference.py seed %llu\n", static_cast<unsigned long long>(seed));
    std::fflush(stdout);
    const std::string command = std::string(kPython) + " " + FERRY_MODELS_REFERENCE_SCRIPT + " " +
                                out + " " + std::to_string(seed);
    if (std::system(command.c_str()) != 0) return "failed";
    return out;
  }();
  return dir;
}

// A reference file by case name.
safetensors::LoadedTensors file(const std::string& name) {
  return safetensors::load(reference_dir() + "/" + name + ".safetensors");
}
// The entries whose names start with `prefix`, with the prefix removed.
TensorDict with_prefix(const TensorDict& all, const std::string& prefix) {
  TensorDict out;
  for (const auto& item : all) {
    if (item.key().rfind(prefix, 0) == 0) out.insert(item.key().substr(prefix.size()), *item);
  }
  return out;
}
// The model's weights: every entry not under input./output./after./grad./grad64.
TensorDict weights(const TensorDict& all) {
  TensorDict out;
  for (const auto& item : all) {
    const std::string& k = item.key();
    if (k.rfind("input.", 0) != 0 && k.rfind("output.", 0) != 0 && k.rfind("after.", 0) != 0 &&
        k.rfind("grad", 0) != 0) {
      out.insert(k, *item);
    }
  }
  return out;
}

class ModelsTorchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* require = std::getenv("FERRY_REQUIRE_TORCH");
    const bool required = require != nullptr && std::string(require) != "0";
    const std::string& dir = reference_dir();
    ASSERT_NE(dir, "failed") << "tests/nn/models_reference.py failed (see its output above)";
    if (dir.empty()) {
      if (required) {
        FAIL() << "FERRY_REQUIRE_TORCH=1 but " << kPython
               << " cannot import torch and torchvision (apt-get install python3-torch "
                  "python3-torchvision)";
      }
      GTEST_SKIP() << kPython
                   << " with torch and torchvision is missing: the comparisons "
                      "against PyTorch are skipped (set FERRY_REQUIRE_TORCH=1 to fail instead)";
    }
  }
};

// float32 closeness scaled to the reference's magnitude: |a - b| <= 1e-4 * |b| + 1e-4 * max|b|
// (the absolute part covers entries near zero that are sums of large terms).
// `what` (an output's name) prints the largest error seen; running statistics pass nullptr.
// `floor` bounds the scale from below (for references that are rounding noise around 0).
::testing::AssertionResult close_f32(const Tensor& got, const Tensor& want,
                                     const char* what = nullptr, double floor = 1e-3) {
  const Tensor w = want.to(kFloat64);
  const double scale = w.abs().amax().item<double>();
  const double worst = (got.cpu().to(kFloat64) - w).abs().amax().item<double>();
  if (what != nullptr) {
    std::printf("%s: float32 max |error| %.3g, max |reference| %.3g\n", what, worst, scale);
  }
  return all_close(got.cpu().to(kFloat32), want, 1e-4, 1e-4 * std::max(scale, floor));
}

// bfloat16 (8 mantissa bits through a deep network): relative L2 error below `bound`.
::testing::AssertionResult close_bf16(const Tensor& got, const Tensor& want, double bound) {
  const Tensor g = got.cpu().to(kFloat64), w = want.to(kFloat64);
  const double err = (g - w).pow(2).sum().sqrt().item<double>();
  const double norm = w.pow(2).sum().sqrt().item<double>();
  std::printf("bfloat16 relative L2 error %.3g (bound %.3g)\n", err / norm, bound);
  if (err <= bound * norm) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "relative L2 error " << err / norm << " > " << bound;
}

// Every parameter's .grad against PyTorch's ("<prefix><name>"), to rtol 1e-4 (the float32
// closeness; a float64 pair is far closer). Some gradients are exactly zero in exact arithmetic
// (attention key biases: softmax ignores a shift shared by a row), so both sides hold rounding
// noise: the scale is at least 1e-2.
void expect_grads(nn::Module& net, const TensorDict& all, const std::string& prefix = "grad.") {
  double worst = 0.0;
  for (const auto& item : net.named_parameters()) {
    SCOPED_TRACE(item.key());
    const Tensor& want = all[prefix + item.key()];
    ASSERT_TRUE(item->grad().defined());
    EXPECT_TRUE(close_f32(item->grad(), want, nullptr, 1e-2));
    const double scale = std::max(want.abs().amax().item<double>(), 1e-2);
    const double err =
        (item->grad().cpu().to(kFloat64) - want.to(kFloat64)).abs().amax().item<double>();
    worst = std::max(worst, err / scale);
  }
  std::printf("gradients: largest max|error| / max|reference| %.3g\n", worst);
}

// check_grads: the train step's gradients, in float64 (see models_reference.py); resnet18 on the
// CPU only, to keep the suite fast (float64 convolutions run on plain loops; BERT's gradients are
// checked on sim).
void check_resnet(const std::string& name, nn::models::ResNet net, Device device,
                  bool check_grads) {
  const safetensors::LoadedTensors all = file(name);
  net->load_state_dict(weights(all), /*strict=*/true);
  net->to(device);
  const Tensor x = all["input.x"].to(device);
  net->eval();
  {
    NoGradGuard no_grad;
    EXPECT_TRUE(close_f32(net->forward(x), all["output.eval"], "logits (eval)"))
        << name << " eval on " << device;
  }
  // One training step: batch statistics and the running ones updated.
  net->train();
  const Tensor logits = [&] {
    NoGradGuard no_grad;
    return net->forward(x);
  }();
  EXPECT_TRUE(close_f32(logits, all["output.train"], "logits (train)"))
      << name << " train on " << device;
  if (check_grads) {
    // The same step in float64 from the loaded weights, against PyTorch's float64 gradients.
    nn::models::ResNet net64 = name == "resnet18" ? nn::models::resnet18() : nn::models::resnet50();
    net64->load_state_dict(weights(all), /*strict=*/true);
    net64->to(device, kFloat64);
    const Tensor logits64 = net64->forward(x.to(kFloat64));
    (logits64 * all["input.grad_output"].to(device)).sum().backward();
    expect_grads(*net64, all, "grad64.");
  }
  // One training forward updated the running statistics exactly as PyTorch's did.
  const TensorDict after = with_prefix(all, "after.");
  const TensorDict state = net->state_dict();
  for (const auto& item : after) {
    SCOPED_TRACE(item.key());
    const Tensor got = state[item.key()];
    if (item->dtype() == kInt64) {
      EXPECT_EQ(got.cpu().item<int64_t>(), item.value().item<int64_t>());
    } else {
      EXPECT_TRUE(close_f32(got, *item));
    }
  }
}

// The float64 gradients in optimized builds only: under the sanitizers their float64 kernels
// run one lane at a time (one SIMD target there), and cpu_nn's tests check those kernels.
#if defined(FERRY_SANITIZER_BUILD)
constexpr bool kCheckFloat64Gradients = false;
#else
constexpr bool kCheckFloat64Gradients = true;
#endif

TEST_F(ModelsTorchTest, ResNet18MatchesTorchvisionOnCpu) {
  check_resnet("resnet18", nn::models::resnet18(), Device("cpu"), kCheckFloat64Gradients);
}

TEST_F(ModelsTorchTest, ResNet50MatchesTorchvisionOnCpu) {
  check_resnet("resnet50", nn::models::resnet50(), Device("cpu"), false);
}

TEST_F(ModelsTorchTest, ResNet18MatchesTorchvisionOnSim) {
  check_resnet("resnet18", nn::models::resnet18(), Device("sim:0"), false);
}

TEST_F(ModelsTorchTest, ResNet50MatchesTorchvisionOnSim) {
  check_resnet("resnet50", nn::models::resnet50(), Device("sim:0"), false);
}

// Module::load by torchvision's names from a weights-only file (the documented example), then
// bfloat16 on the CPU and on sim:0: the same logits loosely, in eval and in train mode.
TEST_F(ModelsTorchTest, ResNet18LoadsAFileAndRunsInBFloat16) {
  const safetensors::LoadedTensors all = file("resnet18");
  const std::string path = scratch_path("resnet18.safetensors");
  safetensors::save(path, weights(all));
  NoGradGuard no_grad;
  for (const char* device : {"cpu", "sim:0"}) {
    SCOPED_TRACE(device);
    auto net = nn::models::resnet18();
    net->load(path);
    net->eval();
    if (std::string(device) == "cpu") {
      EXPECT_TRUE(close_f32(net->forward(all["input.x"]), all["output.eval"], "logits (eval)"));
    }
    net->to(Device(device), kBFloat16);
    EXPECT_EQ(net->named_buffers()["bn1.num_batches_tracked"].dtype(), kInt64);
    const Tensor x = all["input.x"].to(Device(device), kBFloat16);
    const Tensor logits = net->forward(x);
    EXPECT_EQ(logits.dtype(), kBFloat16);
    EXPECT_TRUE(close_bf16(logits, all["output.eval"], 0.03));
    // Train mode normalizes with bfloat16 batch statistics of small 2x2 maps: looser.
    net->train();
    EXPECT_TRUE(close_bf16(net->forward(x), all["output.train"], 0.1));
  }
}

nn::models::BertConfig small_bert() {
  return nn::models::BertConfig{.vocab_size = 100,
                                .hidden_size = 64,
                                .num_hidden_layers = 2,
                                .num_attention_heads = 4,
                                .intermediate_size = 128,
                                .hidden_dropout_prob = 0.0,
                                .attention_probs_dropout_prob = 0.0,
                                .max_position_embeddings = 32};
}

void check_bert(Device device, ScalarType dtype) {
  const safetensors::LoadedTensors all = file("bert");
  auto net = nn::models::bert(small_bert());
  net->load_state_dict(weights(all), /*strict=*/true);
  net->to(device, dtype);
  const Tensor ids = all["input.input_ids"].to(device);
  const Tensor mask = all["input.attention_mask"].to(device);
  const Tensor types = all["input.token_type_ids"].to(device);
  for (const char* mode : {"eval", "train"}) {
    SCOPED_TRACE(mode);
    const bool train = std::string(mode) == "train";
    net->train(train);
    // Gradients in float32 train mode only.
    AutoGradMode grad_mode(train && dtype == kFloat32);
    const nn::models::BertOutput out = net->forward(ids, mask, types);
    const Tensor& want_hidden = all[std::string("output.") + mode + ".last_hidden_state"];
    const Tensor& want_pooled = all[std::string("output.") + mode + ".pooler_output"];
    if (dtype == kFloat32) {
      EXPECT_TRUE(close_f32(out.last_hidden_state, want_hidden, "last_hidden_state"));
      EXPECT_TRUE(close_f32(out.pooler_output, want_pooled, "pooler_output"));
      if (train) {
        ((out.last_hidden_state * all["input.grad_hidden"].to(device)).sum() +
         (out.pooler_output * all["input.grad_pooled"].to(device)).sum())
            .backward();
        expect_grads(*net, all);
      }
    } else {
      EXPECT_TRUE(close_bf16(out.last_hidden_state, want_hidden, 0.03));
      EXPECT_TRUE(close_bf16(out.pooler_output, want_pooled, 0.03));
    }
  }
}

TEST_F(ModelsTorchTest, BertMatchesPyTorchOnCpu) { check_bert(Device("cpu"), kFloat32); }
TEST_F(ModelsTorchTest, BertMatchesPyTorchOnSim) { check_bert(Device("sim:0"), kFloat32); }
TEST_F(ModelsTorchTest, BertMatchesPyTorchInBFloat16) {
  check_bert(Device("cpu"), kBFloat16);
  check_bert(Device("sim:0"), kBFloat16);
}

TEST_F(ModelsTorchTest, TransformerEncoderLayerMatchesPyTorch) {
  const safetensors::LoadedTensors all = file("transformer");
  for (const bool norm_first : {false, true}) {
    const std::string act = norm_first ? "gelu" : "relu";
    const std::string tag = act + (norm_first ? ".pre." : ".post.");
    SCOPED_TRACE(tag);
    for (const char* device : {"cpu", "sim:0"}) {
      nn::TransformerEncoderLayer layer(
          32, 4,
          nn::TransformerEncoderLayerOptions{.dim_feedforward = 64,
                                             .dropout = 0.0,
                                             .activation = act,
                                             .batch_first = true,
                                             .norm_first = norm_first});
      TensorDict state = with_prefix(all, tag);
      const Tensor x = state["input"];
      const Tensor y = state["output"];
      state.erase("input");
      state.erase("output");
      layer->load_state_dict(state, /*strict=*/true);
      layer->to(Device(device));
      layer->eval();
      NoGradGuard no_grad;
      EXPECT_TRUE(close_f32(layer(x.to(Device(device))), y, "encoder layer output")) << device;
    }
  }
}

TEST_F(ModelsTorchTest, MultiheadAttentionMatchesPyTorch) {
  const safetensors::LoadedTensors all = file("transformer");
  TensorDict state = with_prefix(all, "mha.");
  nn::MultiheadAttention mha(32, 4);
  TensorDict weights_only;
  for (const char* k : {"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}) {
    weights_only.insert(k, state[k]);
  }
  mha->load_state_dict(weights_only, /*strict=*/true);
  mha->eval();
  NoGradGuard no_grad;
  const auto [out, weights] =
      mha->forward(state["q"], state["k"], state["v"], state["pad"], /*need_weights=*/true);
  EXPECT_TRUE(close_f32(out, state["out"], "attention output"));
  EXPECT_TRUE(close_f32(weights, state["weights"], "attention weights"));
}

}  // namespace
}  // namespace ferry::testing
