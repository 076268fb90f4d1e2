// Switch layers: running a zoo model layer by layer gives its forward() output bit for bit
// (ResNet, BERT, a Sequential, on the CPU and a sim device), layers share the model's weights,
// weight_bytes counts each tensor once, zoo names are checked, the profiler measures something
// plausible on sim, and `ferry explain-switch` prints a plan.
#include <gtest/gtest.h>

#include <string>

#include "ferry/autograd/grad_mode.h"
#include "ferry/core/error.h"
#include "ferry/nn/models/bert.h"
#include "ferry/nn/models/mlp.h"
#include "ferry/nn/models/resnet.h"
#include "ferry/ops/factories.h"
#include "ferry/switch/switch_layers.h"
#include "ferry/switch/switch_profile.h"
#include "ferry/switch/zoo_model.h"
#include "tests/support/random.h"
#include "tests/support/tensor_compare.h"
#include "tests/support/tool.h"

namespace ferry::switch_ {
namespace {

void expect_same_values(const Tensor& a, const Tensor& b) { EXPECT_ALL_CLOSE(a, b, 0.0, 0.0); }

TEST(SwitchLayers, ResNetLayersGiveTheModelsOutput) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  NoGradGuard no_grad;
  for (const char* device : {"cpu", "sim:0"}) {
    SCOPED_TRACE(device);
    ZooModel model = make_zoo_model("resnet18", ferry::testing::test_seed(), {2, 32, 8});
    model.module->to(Device(device));
    const Tensor x = model.example_input(Device(device), ferry::testing::test_seed());
    auto* resnet = dynamic_cast<nn::models::ResNetImpl*>(model.module.get());
    ASSERT_NE(resnet, nullptr);
    ASSERT_EQ(model.layers.size(), 4u + 8u + 2u);
    EXPECT_EQ(model.layers[4].name, "layer1.0");
    EXPECT_EQ(model.layers.back().name, "fc");
    expect_same_values(run_layers(model.layers, x).cpu(), resnet->forward(x).cpu());
  }
}

TEST(SwitchLayers, BertLayersGiveThePoolerOutput) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  NoGradGuard no_grad;
  ZooModel model = make_zoo_model("bert-tiny", ferry::testing::test_seed(), {2, 224, 16});
  model.module->to(Device("sim:0"));
  const Tensor ids = model.example_input(Device("sim:0"), 3);
  EXPECT_EQ(ids.dtype(), kInt64);
  auto* bert = dynamic_cast<nn::models::BertModelImpl*>(model.module.get());
  ASSERT_NE(bert, nullptr);
  ASSERT_EQ(model.layers.size(), 4u);  // embeddings, 2 encoder layers, pooler
  EXPECT_EQ(model.layers[1].name, "encoder.layer.0");
  expect_same_values(run_layers(model.layers, ids).cpu(), bert->forward(ids).pooler_output.cpu());
}

TEST(SwitchLayers, SequentialChildrenAreTheLayersAndShareWeights) {
  nn::Sequential mlp = nn::models::mlp(8, {16, 16}, 4);
  const std::vector<SwitchLayer> layers = switch_layers(mlp);
  ASSERT_EQ(layers.size(), mlp->size());
  EXPECT_EQ(layers[0].name, "0");
  EXPECT_EQ(layers[0].module.get(), mlp->ptr(0).get());
  // 8*16+16, 16*16+16, 16*4+4 float32 weights.
  EXPECT_EQ(weight_bytes(*mlp), (8 * 16 + 16 + 16 * 16 + 16 + 16 * 4 + 4) * 4u);
  const Tensor x = randn({3, 8});
  NoGradGuard no_grad;
  expect_same_values(run_layers(layers, x), mlp->forward(x));
}

TEST(SwitchLayers, UnknownArchitecturesAreNamed) {
  try {
    make_zoo_model("resnet19");
    FAIL() << "resnet19 was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'resnet19'"), std::string::npos) << what;
    EXPECT_NE(what.find("resnet152"), std::string::npos) << what;
  }
  EXPECT_THROW(make_zoo_model("resnet18", 0, {0, 224, 128}), Error);
}

TEST(SwitchProfile, MeasuresTheSimLinkAndEachLayer) {
  const LinkProfile link = measure_link(Device("sim:0"), 3);
  EXPECT_GT(link.bandwidth_bytes_per_s, 0);
  EXPECT_GT(link.copy_latency_s, 0);
  EXPECT_GE(link.device_wait_s, 0);
  EXPECT_GE(link.host_sync_s, 0);
  ZooModel model = make_zoo_model("bert-tiny", 0, {1, 224, 8});
  model.module->to(Device("sim:0"));
  const auto costs = profile_layers(model.layers, model.example_input(Device("sim:0")), link, 1);
  ASSERT_EQ(costs.size(), model.layers.size());
  for (size_t i = 0; i < costs.size(); ++i) {
    EXPECT_EQ(costs[i].name, model.layers[i].name);
    EXPECT_EQ(costs[i].bytes, weight_bytes(*model.layers[i].module));
    EXPECT_GT(costs[i].compute_s, 0);
    EXPECT_DOUBLE_EQ(costs[i].transfer_s,
                     static_cast<double>(costs[i].bytes) / link.bandwidth_bytes_per_s);
  }
  EXPECT_THROW(measure_link(Device("cpu"), 1), Error);
}

TEST(SwitchExplain, PrintsEachPlanAndFerrysGroups) {
  FERRY_SKIP_WITHOUT_TOOL();
  const auto run = ferry::testing::run_ferry_tool(
      "explain-switch bert-tiny --batch 1 --seq-len 8 --repeats 1 --layers",
      "FERRY_SIM_BANDWIDTH=1G");
  ASSERT_EQ(run.status, 0) << run.out;
  for (const char* part : {"explain-switch bert-tiny on sim:0", "encoder.layer.1", "load, then run",
                           "PipeSwitch search", "ferry: optimal", "ferry's groups:"}) {
    EXPECT_NE(run.out.find(part), std::string::npos) << part << " missing in:\n" << run.out;
  }
  const auto bad = ferry::testing::run_ferry_tool("explain-switch resnet19");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("resnet152"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace ferry::switch_
