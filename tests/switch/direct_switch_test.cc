// Direct host access in switches: plan_direct against every direct set and every grouping of small
// random models (exhaustive enumeration, seeds printed), its cost model reducing to
// simulate_switch with no direct layer, its bound when eligible layers are left out, bad input
// refused; and switches with direct layers (their weights read in place from the mapped image)
// giving outputs equal bit for bit to the resident model's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ferry/autograd/grad_mode.h"
#include "ferry/backends/sim/sim.h"
#include "ferry/core/error.h"
#include "ferry/device/guard.h"
#include "ferry/device/host_mapping.h"
#include "ferry/memory/caching_allocator.h"
#include "ferry/switch/direct_layers.h"
#include "ferry/switch/direct_plan.h"
#include "ferry/switch/pipelined_switch.h"
#include "ferry/switch/zoo_model.h"
#include "tests/support/random.h"
#include "tests/support/tensor_compare.h"
#include "tests/switch/switch_plan_util.h"

namespace ferry::switch_ {
namespace direct_switch_test {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
const Device kSim0("sim:0");
using testing::every_grouping;
using testing::kPlannerRegimes;
using testing::reference_output;

// Layers of which one in five holds no weights.
std::vector<LayerCost> random_layers(std::mt19937_64& rng, size_t n, double transfer_scale,
                                     double compute_scale) {
  return testing::random_layers(rng, n, transfer_scale, compute_scale, /*weightless=*/0.2);
}

// Going direct costs between nothing and twice the layer's transfer; some layers cannot.
std::vector<double> random_extra(std::mt19937_64& rng, const std::vector<LayerCost>& layers) {
  std::uniform_real_distribution<double> unit(0.0, 2.0);
  std::vector<double> extra;
  for (const LayerCost& layer : layers) {
    extra.push_back(rng() % 4 == 0 ? kInfinity : layer.transfer_s * unit(rng));
  }
  return extra;
}

// The least completion of every eligible direct set times every grouping, by enumeration.
double brute_force_best(const std::vector<LayerCost>& layers, const GroupCosts& costs,
                        const std::vector<double>& extra) {
  const size_t n = layers.size();
  double best = kInfinity;
  for (uint64_t set = 0; set < (uint64_t{1} << n); ++set) {
    std::vector<bool> direct(n);
    bool allowed = true;
    for (size_t i = 0; i < n; ++i) {
      direct[i] = ((set >> i) & 1) != 0;
      if (direct[i] && (!std::isfinite(extra[i]) || layers[i].bytes == 0)) allowed = false;
    }
    if (!allowed) continue;
    for (const std::vector<size_t>& ends : every_grouping(n)) {
      best =
          std::min(best, simulate_direct_switch(layers, costs, extra, direct, ends).completion_s);
    }
  }
  return best;
}

TEST(DirectPlan, MatchesExhaustiveSearchOnRandomModels) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  std::mt19937_64 rng = ferry::testing::test_rng();
  for (const auto& regime : kPlannerRegimes) {
    for (int trial = 0; trial < 10; ++trial) {
      const size_t n = 1 + rng() % 8;
      const std::vector<LayerCost> layers = random_layers(rng, n, regime[0], regime[1]);
      const std::vector<double> extra = random_extra(rng, layers);
      const GroupCosts costs{regime[2], regime[3]};
      const DirectPlan plan = plan_direct(layers, costs, extra);
      const double expected = brute_force_best(layers, costs, extra);
      ASSERT_NEAR(plan.grouping.completion_s, expected, 1e-12 * std::max(1.0, expected))
          << "n=" << n << " regime " << regime[0] << "/" << regime[1] << "/" << regime[2] << "/"
          << regime[3];
      EXPECT_TRUE(plan.exact);
      EXPECT_DOUBLE_EQ(plan.grouping.completion_s,
                       simulate_direct_switch(layers, costs, extra, plan.direct, plan.grouping.ends)
                           .completion_s);
      // Never worse than plain pipelining (the empty set is a candidate).
      EXPECT_LE(plan.grouping.completion_s,
                group_optimally(layers, costs).completion_s * (1 + 1e-12));
    }
  }
}

TEST(DirectPlan, WithoutDirectLayersItIsTheGroupingModel) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  std::mt19937_64 rng = ferry::testing::test_rng();
  for (int trial = 0; trial < 20; ++trial) {
    const size_t n = 1 + rng() % 10;
    const std::vector<LayerCost> layers = random_layers(rng, n, 1e-3, 1e-3);
    const GroupCosts costs{1e-4, 2e-5};
    const std::vector<double> never(n, kInfinity);
    const Grouping optimal = group_optimally(layers, costs);
    EXPECT_DOUBLE_EQ(simulate_direct_switch(layers, costs, never, {}, optimal.ends).completion_s,
                     optimal.completion_s);
    const DirectPlan plan = plan_direct(layers, costs, never);
    EXPECT_EQ(plan.candidates, 0u);
    EXPECT_NEAR(plan.grouping.completion_s, optimal.completion_s, 1e-15);
    for (bool d : plan.direct) EXPECT_FALSE(d);
  }
}

TEST(DirectPlan, AHeavyFirstLayerThatIsCheapToReadGoesDirect) {
  // BERT's shape: a large embedding first (80 ms to copy, 0.1 ms to read in place), then layers.
  std::vector<LayerCost> layers = {{"embeddings", 90'000'000, 8e-3, 1e-4}};
  for (int i = 0; i < 6; ++i) layers.push_back({"encoder", 7'000'000, 6e-4, 1e-3});
  std::vector<double> extra(layers.size(), 1e-3);
  extra[0] = 1e-4;
  const DirectPlan plan = plan_direct(layers, {1e-5, 1e-5}, extra);
  EXPECT_TRUE(plan.direct[0]);
  EXPECT_LT(plan.grouping.completion_s, group_optimally(layers, {1e-5, 1e-5}).completion_s - 5e-3);
  // The timeline: no copy carries the embeddings.
  const SwitchTimeline timeline =
      simulate_direct_switch(layers, {1e-5, 1e-5}, extra, plan.direct, plan.grouping.ends);
  for (const SwitchSpan& copy : timeline.copies) EXPECT_NE(copy.layer, 0u);
}

TEST(DirectPlan, MoreEligibleLayersThanTheBoundIsNotExact) {
  std::mt19937_64 rng(5);
  const std::vector<LayerCost> layers = random_layers(rng, 14, 1e-3, 1e-3);
  std::vector<double> extra;
  for (const LayerCost& layer : layers) extra.push_back(layer.transfer_s / 2);
  const DirectPlan plan = plan_direct(layers, {1e-5, 1e-5}, extra, 3);
  EXPECT_FALSE(plan.exact);
  EXPECT_FALSE(plan.grouping.exhaustive);
  EXPECT_EQ(plan.candidates, 3u);
  EXPECT_LE(plan.grouping.completion_s,
            group_optimally(layers, {1e-5, 1e-5}).completion_s * (1 + 1e-12));
}

TEST(DirectPlan, BadInputIsRefusedWithWhatWasGiven) {
  const std::vector<LayerCost> layers = {{"a", 10, 1e-3, 1e-3}, {"relu", 0, 0, 1e-4}};
  const std::vector<double> one = {1e-3};
  EXPECT_THROW(plan_direct(layers, {}, one), Error);
  try {
    plan_direct(layers, {}, one);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected one direct cost per layer (2), got 1"),
              std::string::npos)
        << e.what();
  }
  const std::vector<double> negative = {-1, 0};
  EXPECT_THROW(plan_direct(layers, {}, negative), Error);
  const std::vector<double> fine = {1e-4, 1e-4};
  try {
    simulate_direct_switch(layers, {}, fine, {false, true}, std::vector<size_t>{2});
    ADD_FAILURE() << "a weightless layer went direct";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected direct layers to be eligible"),
              std::string::npos)
        << e.what();
  }
}

// ---- switches with direct layers on the sim --------------------------------------------------

class DirectSwitch : public ::testing::Test {
 protected:
  void TearDown() override {
    memory::empty_cache(kSim0);
    sim::configure(sim::SimConfig{});
  }
};

TEST_F(DirectSwitch, OutputsEqualTheResidentModelBitwise) {
  const uint64_t seed = ferry::testing::test_seed();
  SCOPED_TRACE(ferry::testing::seed_trace());
  std::mt19937_64 rng = ferry::testing::test_rng();
  sim::SimConfig chaos;
  chaos.chaos_seed = seed;  // a missing wait shows as a wrong answer
  chaos.chaos_max_delay = std::chrono::microseconds(200);
  sim::configure(chaos);
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer sees the same streams and waits with either model; ResNet-18's 11.7M
  // weights took it 20 s (the other builds run both).
  const std::vector<std::string> archs = {"bert-tiny"};
#else
  const std::vector<std::string> archs = {"bert-tiny", "resnet18"};
#endif
  for (const std::string& arch : archs) {
    SCOPED_TRACE(arch);
    const ZooInputShape shape{1, 32, 8};  // small: the test runs under the sanitizers too
    ZooModel model = make_zoo_model(arch, seed, shape);
    const Tensor input = model.example_input(kSim0, seed);
    const Tensor expected = reference_output(arch, seed, shape, input);
    const ModelImage image(model.layers);
    const SwitchStreams streams = switch_streams(kSim0);
    const size_t n = model.layers.size();
    auto direct = std::make_shared<DirectLayers>();
    direct->mapped = map_image(image, kSim0);
    // The first layer (BERT's embeddings, ResNet's conv1), the last, and some in between.
    direct->direct.assign(n, false);
    for (size_t i = 0; i < n; ++i) {
      const bool weighted = image.layer_end(i) > image.layer_begin(i);
      direct->direct[i] = weighted && (i == 0 || i + 1 == n || rng() % 3 == 0);
    }
    std::vector<std::vector<size_t>> groupings = {{n}, {}};
    for (size_t i = 1; i <= n; ++i) groupings[1].push_back(i);
    for (const auto& ends : groupings) {
      SwitchOptions options;
      options.direct = direct;
      QueuedSwitch queued = switch_in(image, model.layers, ends, input, streams, options);
      // A direct layer's weights are the mapped image; the others are in the device block.
      const Tensor first_weight = image.tensors().front().tensor;
      EXPECT_EQ(first_weight.device(), kSim0);
      EXPECT_TRUE(sim::is_host_mapped(first_weight.const_data_ptr()));
      EXPECT_EQ(sim::host_address(first_weight.const_data_ptr()),
                static_cast<const void*>(image.host().const_data_ptr()));
      {
        StreamGuard on_compute(streams.compute);
        EXPECT_ALL_CLOSE(queued.output.cpu(), expected, 0.0, 0.0);
      }
      streams.compute.synchronize();
      switch_out(image);
      EXPECT_TRUE(first_weight.is_pinned());
    }
  }
}

TEST_F(DirectSwitch, GroupCopyRangesSkipDirectLayers) {
  ZooModel model = make_zoo_model("resnet18", 3, {1, 32, 8});
  const ModelImage image(model.layers);
  const size_t n = model.layers.size();
  const auto whole = group_copy_ranges(image, 0, n, nullptr);
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].first, image.layer_begin(0));
  EXPECT_EQ(whole[0].second, image.layer_end(n - 1));
  std::vector<bool> direct(n, false);
  direct[0] = true;      // conv1
  direct[n - 1] = true;  // fc
  direct[4] = true;      // layer1.0
  const auto ranges = group_copy_ranges(image, 0, n, &direct);
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0], std::make_pair(image.layer_begin(1), image.layer_end(3)));
  EXPECT_EQ(ranges[1], std::make_pair(image.layer_begin(5), image.layer_end(n - 2)));
  EXPECT_TRUE(group_copy_ranges(image, 0, 1, &direct).empty());
  const Tensor mapped = map_image(image, kSim0);
  EXPECT_THROW(bind_direct(image, mapped, std::vector<bool>(n - 1, false)), Error);
  EXPECT_THROW(bind_direct(image, mapped.narrow(0, 0, 16), direct), Error);
}

}  // namespace
}  // namespace direct_switch_test
}  // namespace ferry::switch_
