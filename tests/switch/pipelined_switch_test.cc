// The model image and the pipelined switch on sim devices: the image's layout (aligned, layer
// ranges contiguous and in order, values kept), a switched model's output equal bit for bit to the
// same model moved with Module::to, for several groupings and after switching out and in again;
// under a slow link with chaos (a missing wait would show as a wrong answer) the call returns
// while the copies are still running, and bad streams and inputs are refused.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "ferry/autograd/grad_mode.h"
#include "ferry/backends/sim/sim.h"
#include "ferry/core/error.h"
#include "ferry/device/guard.h"
#include "ferry/device/stream.h"
#include "ferry/ops/factories.h"
#include "ferry/switch/grouping.h"
#include "ferry/switch/model_image.h"
#include "ferry/switch/pipelined_switch.h"
#include "ferry/switch/zoo_model.h"
#include "tests/support/random.h"
#include "tests/support/tensor_compare.h"
#include "tests/switch/switch_plan_util.h"

namespace ferry::switch_ {
namespace {

const Device kSim0("sim:0");
using testing::output_on;
using testing::reference_output;

std::vector<size_t> random_grouping(std::mt19937_64& rng, size_t n) {
  std::vector<size_t> ends;
  for (size_t i = 1; i < n; ++i) {
    if (rng() % 3 == 0) ends.push_back(i);
  }
  ends.push_back(n);
  return ends;
}

class PipelinedSwitch : public ::testing::Test {
 protected:
  void TearDown() override { sim::configure(sim::SimConfig{}); }
};

TEST_F(PipelinedSwitch, ImageLaysLayersOutInOrderAndKeepsTheValues) {
  const uint64_t seed = ferry::testing::test_seed();
  SCOPED_TRACE(ferry::testing::seed_trace());
  ZooModel model = make_zoo_model("resnet18", seed, {1, 32, 8});
  const ZooModel untouched = make_zoo_model("resnet18", seed, {1, 32, 8});
  const ModelImage image(model.layers);
  ASSERT_EQ(image.layer_count(), model.layers.size());
  uint64_t total = 0;
  for (const SwitchLayer& layer : model.layers) total += weight_bytes(*layer.module);
  EXPECT_GE(image.nbytes(), total);
  EXPECT_LE(image.nbytes(), total + image.tensors().size() * kImageAlignment);
  for (size_t i = 0; i < image.layer_count(); ++i) {
    EXPECT_LE(image.layer_begin(i), image.layer_end(i));
    if (i > 0) {
      EXPECT_LE(image.layer_end(i - 1), image.layer_begin(i));
    }
  }
  EXPECT_EQ(image.layer_begin(2), image.layer_end(2)) << "relu has no weights";
  for (const ImageTensor& t : image.tensors()) {
    EXPECT_EQ(t.offset % kImageAlignment, 0u);
    EXPECT_TRUE(t.tensor.is_pinned());
    EXPECT_EQ(static_cast<const char*>(t.tensor.const_data_ptr()),
              static_cast<const char*>(image.host().const_data_ptr()) + t.offset);
  }
  // The module now reads its weights from the image, with the values it had.
  const auto params = model.module->named_parameters();
  const auto expected = untouched.module->named_parameters();
  ASSERT_EQ(params.size(), expected.size());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_ALL_CLOSE(params[i].value(), expected[i].value(), 0.0, 0.0) << params[i].key();
  }
}

TEST_F(PipelinedSwitch, OutputEqualsTheResidentModelForEveryGrouping) {
  const uint64_t seed = ferry::testing::test_seed();
  SCOPED_TRACE(ferry::testing::seed_trace());
  std::mt19937_64 rng = ferry::testing::test_rng();
  const ZooInputShape shape{2, 32, 8};
  ZooModel model = make_zoo_model("resnet18", seed, shape);
  const Tensor input = model.example_input(kSim0, seed);
  const Tensor expected = reference_output("resnet18", seed, shape, input);
  const ModelImage image(model.layers);
  const SwitchStreams streams = switch_streams(kSim0);
  const size_t n = model.layers.size();
  std::vector<std::vector<size_t>> groupings = {{n}, {}, random_grouping(rng, n)};
  for (size_t i = 1; i <= n; ++i) groupings[1].push_back(i);
  for (const auto& ends : groupings) {
    SCOPED_TRACE(::testing::Message() << ends.size() << " groups");
    QueuedSwitch queued = switch_in(image, model.layers, ends, input, streams);
    EXPECT_EQ(model.module->named_parameters()[0].value().device(), kSim0);
    EXPECT_ALL_CLOSE(output_on(streams, queued), expected, 0.0, 0.0);
    // Resident now: the ready path runs on the same weights.
    {
      NoGradGuard no_grad;
      StreamGuard on_compute(streams.compute);
      EXPECT_ALL_CLOSE(run_layers(model.layers, input).cpu(), expected, 0.0, 0.0);
    }
    streams.compute.synchronize();
    switch_out(image);
    EXPECT_TRUE(model.module->named_parameters()[0].value().is_pinned());
  }
}

TEST_F(PipelinedSwitch, SlowLinkWithChaosReturnsAtOnceAndStillComputesRight) {
  const uint64_t seed = ferry::testing::test_seed();
  SCOPED_TRACE(ferry::testing::seed_trace());
  const ZooInputShape shape{2, 224, 16};
  ZooModel model = make_zoo_model("bert-tiny", seed, shape);
  const Tensor input = model.example_input(kSim0, seed);
  const Tensor expected = reference_output("bert-tiny", seed, shape, input);
  const ModelImage image(model.layers);

  sim::SimConfig slow;
  // About a second for the whole image: every layer waits for its group for real.
  slow.bandwidth[static_cast<int>(sim::Link::HostToDevice)] = static_cast<double>(image.nbytes());
  slow.chaos_seed = seed;
  slow.chaos_max_delay = std::chrono::microseconds(300);
  sim::configure(slow);

  const SwitchStreams streams = switch_streams(kSim0);
  const std::vector<size_t> per_layer = {1, 2, 3, 4};
  QueuedSwitch queued = switch_in(image, model.layers, per_layer, input, streams);
  EXPECT_FALSE(streams.copy.query()) << "switch_in waited for the copies on the host";
  EXPECT_EQ(queued.arrivals.size(), 4u);
  EXPECT_ALL_CLOSE(output_on(streams, queued), expected, 0.0, 0.0);
}

TEST_F(PipelinedSwitch, BadStreamsAndInputsAreRefused) {
  ZooModel model = make_zoo_model("bert-tiny", 0, {1, 224, 8});
  const ModelImage image(model.layers);
  const SwitchStreams streams = switch_streams(kSim0);
  const Tensor input = model.example_input(kSim0);
  const std::vector<size_t> one_group = {model.layers.size()};
  EXPECT_THROW(switch_in(image, model.layers, one_group, input, {streams.copy, streams.copy}),
               Error);
  EXPECT_THROW(switch_in(image, model.layers, one_group, input,
                         {get_stream_from_pool(Device("sim:1")), streams.compute}),
               Error);
  EXPECT_THROW(switch_in(image, model.layers, one_group, input.cpu(), streams), Error);
  EXPECT_THROW(switch_in(image, model.layers, std::vector<size_t>{1}, input, streams), Error);
  EXPECT_THROW(image.bind(empty({3}, TensorOptions().dtype(kUInt8))), Error);
}

}  // namespace
}  // namespace ferry::switch_
