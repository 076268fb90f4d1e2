// The switch grouping planners: group_optimally and group_parallel against every grouping (and
// every route choice) of small random models (exhaustive enumeration, seeds printed), the timeline
// model's rules, PipeSwitch's search never beating the optimum, the regimes where the answer is
// known, and bad input refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/switch/grouping.h"
#include "ferry/switch/parallel_grouping.h"
#include "tests/support/random.h"
#include "tests/switch/switch_plan_util.h"

namespace ferry::switch_ {
namespace {

// Every layer holds weights.
std::vector<LayerCost> random_layers(std::mt19937_64& rng, size_t n, double transfer_scale,
                                     double compute_scale) {
  return testing::random_layers(rng, n, transfer_scale, compute_scale);
}

// The least completion time of all 2^(n-1) groupings, by enumeration.
double brute_force_best(const std::vector<LayerCost>& layers, const GroupCosts& costs) {
  const size_t n = layers.size();
  double best = std::numeric_limits<double>::infinity();
  for (const std::vector<size_t>& ends : testing::every_grouping(n)) {
    best = std::min(best, simulate_switch(layers, costs, ends).completion_s);
  }
  return best;
}

TEST(SwitchGrouping, OptimalMatchesExhaustiveSearchOnRandomModels) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  std::mt19937_64 rng = ferry::testing::test_rng();
  for (const auto& regime : testing::kPlannerRegimes) {
    for (int trial = 0; trial < 12; ++trial) {
      const size_t n = 1 + rng() % 12;
      const std::vector<LayerCost> layers = random_layers(rng, n, regime[0], regime[1]);
      const GroupCosts costs{regime[2], regime[3]};
      const Grouping optimal = group_optimally(layers, costs);
      const double expected = brute_force_best(layers, costs);
      ASSERT_NEAR(optimal.completion_s, expected, 1e-12 * std::max(1.0, expected))
          << "n=" << n << " regime " << regime[0] << "/" << regime[1] << "/" << regime[2] << "/"
          << regime[3];
      EXPECT_DOUBLE_EQ(optimal.completion_s,
                       simulate_switch(layers, costs, optimal.ends).completion_s);
      EXPECT_EQ(optimal.planner, "optimal");

      const Grouping pipeswitch = group_like_pipeswitch(layers, costs);
      EXPECT_GE(pipeswitch.completion_s, optimal.completion_s * (1 - 1e-12));
      EXPECT_LE(pipeswitch.completion_s, group_per_layer(layers, costs).completion_s);
      EXPECT_LE(pipeswitch.completion_s, group_all_at_once(layers, costs).completion_s);
      EXPECT_TRUE(pipeswitch.exhaustive);
    }
  }
}

TEST(SwitchGrouping, TimelineFollowsTheCopyAndComputeRules) {
  const std::vector<LayerCost> layers = {
      {"a", 100, 1.0, 0.5}, {"b", 100, 2.0, 0.25}, {"c", 100, 0.5, 3.0}, {"d", 100, 0.25, 1.0}};
  const GroupCosts costs{0.125, 0.0625};
  const std::vector<size_t> ends = {1, 3, 4};
  const SwitchTimeline timeline = simulate_switch(layers, costs, ends);
  ASSERT_EQ(timeline.copies.size(), 3u);
  ASSERT_EQ(timeline.computes.size(), 4u);
  // Copies back to back: overhead plus the group's transfers.
  EXPECT_DOUBLE_EQ(timeline.copies[0].end_s, 1.125);
  EXPECT_DOUBLE_EQ(timeline.copies[1].start_s, 1.125);
  EXPECT_DOUBLE_EQ(timeline.copies[1].end_s, 1.125 + 0.125 + 2.5);
  EXPECT_DOUBLE_EQ(timeline.copies[2].end_s, 3.75 + 0.125 + 0.25);
  // Layer a waits for group 0 plus the wait; b and c for group 1; d is later than its group.
  EXPECT_DOUBLE_EQ(timeline.computes[0].start_s, 1.1875);
  EXPECT_DOUBLE_EQ(timeline.computes[1].start_s, 3.8125);
  EXPECT_DOUBLE_EQ(timeline.computes[2].start_s, 3.8125 + 0.25);
  EXPECT_DOUBLE_EQ(timeline.computes[3].start_s, 3.8125 + 0.25 + 3.0);
  EXPECT_DOUBLE_EQ(timeline.completion_s, 3.8125 + 0.25 + 3.0 + 1.0);
  EXPECT_EQ(timeline.computes[3].group, 2u);
  EXPECT_EQ(timeline.copies[1].layer, 1u);
}

TEST(SwitchGrouping, KnownRegimes) {
  std::mt19937_64 rng(7);
  const std::vector<LayerCost> layers = random_layers(rng, 40, 1e-3, 1e-3);
  // No per-group cost: finer groups never hurt, so one group per layer is optimal.
  EXPECT_NEAR(group_optimally(layers, {0, 0}).completion_s,
              group_per_layer(layers, {0, 0}).completion_s, 1e-12);
  // A per-group cost far above the model's whole time: one group.
  const Grouping expensive = group_optimally(layers, {10.0, 0});
  EXPECT_EQ(expensive.ends, std::vector<size_t>{40});
  // Never worse than either simple plan, never faster than the copy or the compute alone.
  const GroupCosts costs{5e-5, 2e-5};
  const Grouping optimal = group_optimally(layers, costs);
  EXPECT_LE(optimal.completion_s, group_per_layer(layers, costs).completion_s);
  EXPECT_LE(optimal.completion_s, group_all_at_once(layers, costs).completion_s);
  EXPECT_GE(optimal.completion_s, ready_time(layers));
  double transfer = 0;
  for (const LayerCost& layer : layers) transfer += layer.transfer_s;
  EXPECT_GE(optimal.completion_s, transfer + costs.copy_overhead_s + costs.wait_s);
}

TEST(SwitchGrouping, LargeModelsPlanQuickly) {
  // ResNet-152 has 466 parameterised modules; the exact plan must stay cheap at that size.
  std::mt19937_64 rng(11);
  const std::vector<LayerCost> layers = random_layers(rng, 466, 1e-4, 1e-4);
  const Grouping optimal = group_optimally(layers, {1e-5, 5e-6});
  EXPECT_EQ(optimal.ends.back(), 466u);
  const Grouping pipeswitch = group_like_pipeswitch(layers, {1e-5, 5e-6}, 200'000);
  EXPECT_GE(pipeswitch.completion_s, optimal.completion_s * (1 - 1e-12));
}

TEST(SwitchGrouping, EmptyModelAndDescriptions) {
  EXPECT_TRUE(group_optimally({}, {1, 1}).ends.empty());
  EXPECT_EQ(group_like_pipeswitch({}, {1, 1}).completion_s, 0.0);
  const std::vector<LayerCost> layers = {
      {"conv1", 2'000'000, 1, 1}, {"bn1", 500'000, 1, 1}, {"fc", 4'000'000, 1, 1}};
  const std::vector<std::string> text = describe_groups(layers, std::vector<size_t>{2, 3});
  ASSERT_EQ(text.size(), 2u);
  EXPECT_EQ(text[0], "conv1 .. bn1 (2 layers, 2.50 MB)");
  EXPECT_EQ(text[1], "fc (1 layer, 4.00 MB)");
}

TEST(SwitchGrouping, BadInputIsRefusedWithWhatWasGiven) {
  std::vector<LayerCost> layers = {{"conv1", 1, 1, 1}, {"fc", 1, 1, 1}};
  layers[1].compute_s = std::numeric_limits<double>::quiet_NaN();
  try {
    group_optimally(layers, {0, 0});
    FAIL() << "a NaN compute time was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("compute time for layer 'fc'"), std::string::npos)
        << e.what();
  }
  layers[1].compute_s = 1;
  EXPECT_THROW(group_optimally(layers, {-1, 0}), Error);
  EXPECT_THROW(simulate_switch(layers, {0, 0}, std::vector<size_t>{1}), Error);
  EXPECT_THROW(simulate_switch(layers, {0, 0}, std::vector<size_t>{2, 2}), Error);
  EXPECT_THROW(simulate_switch(layers, {0, 0}, std::vector<size_t>{0, 2}), Error);
  EXPECT_THROW(describe_groups(layers, std::vector<size_t>{3}), Error);
}

// The least completion time of all groupings and all route choices, by enumeration.
double brute_force_parallel(const std::vector<LayerCost>& layers, const GroupCosts& costs,
                            const PeerRoute& peer) {
  const size_t n = layers.size();
  double best = std::numeric_limits<double>::infinity();
  for (const std::vector<size_t>& ends : testing::every_grouping(n)) {
    for (uint64_t on_peer = 0; on_peer < (uint64_t{1} << ends.size()); ++on_peer) {
      std::vector<Route> routes;
      for (size_t g = 0; g < ends.size(); ++g) {
        routes.push_back(on_peer & (uint64_t{1} << g) ? Route::kPeer : Route::kHost);
      }
      best =
          std::min(best, simulate_parallel_switch(layers, costs, peer, ends, routes).completion_s);
    }
  }
  return best;
}

TEST(SwitchGrouping, ParallelMatchesExhaustiveSearchOnRandomModels) {
  SCOPED_TRACE(ferry::testing::seed_trace());
  std::mt19937_64 rng = ferry::testing::test_rng();
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  // Transfer-bound, compute-bound and balanced models, per-group costs from none to large.
  const double regimes[][4] = {{1e-3, 1e-4, 0, 0},
                               {1e-3, 1e-4, 2e-5, 1e-5},
                               {1e-4, 1e-3, 2e-5, 1e-5},
                               {1e-3, 1e-3, 1e-4, 5e-5},
                               {1e-3, 5e-4, 2e-3, 0}};
  int parallel_won = 0;
  for (const auto& regime : regimes) {
    for (int trial = 0; trial < 10; ++trial) {
      const size_t n = 1 + rng() % 8;
      const std::vector<LayerCost> layers = random_layers(rng, n, regime[0], regime[1]);
      const GroupCosts costs{regime[2], regime[3]};
      // A peer link 1.5 to 8 times faster than the host link, the peer's host link 0.8 to 1.25
      // times the target's.
      const PeerRoute peer{regime[2] * unit(rng), 0.8 + 0.45 * unit(rng), regime[2] * unit(rng),
                           0.125 + 0.54 * unit(rng)};
      const ParallelPlan plan = group_parallel(layers, costs, peer, /*resolution_s=*/0);
      const double expected = brute_force_parallel(layers, costs, peer);
      // The default grid: never below the optimum, at most bound_s above it.
      const ParallelPlan bounded = group_parallel(layers, costs, peer);
      EXPECT_GE(bounded.completion_s, expected * (1 - 1e-9));
      EXPECT_LE(
          bounded.completion_s,
          expected +
              std::max(bounded.bound_s, kMinGain * group_optimally(layers, costs).completion_s) +
              1e-12);
      const std::string where = "n=" + std::to_string(n) + " regime " + std::to_string(regime[0]) +
                                "/" + std::to_string(regime[1]) + "/" + std::to_string(regime[2]) +
                                "/" + std::to_string(regime[3]);
      if (plan.planner == "parallel") {
        ASSERT_NEAR(plan.completion_s, expected, 1e-9 * std::max(1e-3, expected)) << where;
      } else {  // the peer does not win by kMinGain
        ASSERT_GE(expected, plan.completion_s * (1 - kMinGain) - 1e-15) << where;
      }
      EXPECT_DOUBLE_EQ(
          plan.completion_s,
          simulate_parallel_switch(layers, costs, peer, plan.ends, plan.routes).completion_s);
      EXPECT_LE(plan.completion_s, group_optimally(layers, costs).completion_s) << where;
      EXPECT_EQ(plan.planner, plan.peer_groups() > 0 ? "parallel" : "optimal") << where;
      parallel_won += plan.peer_groups() > 0 ? 1 : 0;
    }
  }
  EXPECT_GT(parallel_won, 5);  // the peer route is taken where it wins, and it often does
}

TEST(SwitchGrouping, ParallelWithoutAFasterPeerLinkIsTheSingleRouteOptimum) {
  std::mt19937_64 rng(5);
  const std::vector<LayerCost> layers = random_layers(rng, 30, 1e-3, 5e-4);
  const GroupCosts costs{2e-5, 1e-5};
  const Grouping single = group_optimally(layers, costs);
  for (const std::optional<PeerRoute>& peer :
       {std::optional<PeerRoute>{}, std::optional<PeerRoute>{PeerRoute{1e-5, 1, 1e-5, 1.0}},
        std::optional<PeerRoute>{PeerRoute{0, 1, 0, 2.0}}}) {
    const ParallelPlan plan = group_parallel(layers, costs, peer);
    EXPECT_EQ(plan.ends, single.ends);
    EXPECT_EQ(plan.routes, std::vector<Route>(single.ends.size(), Route::kHost));
    EXPECT_EQ(plan.completion_s, single.completion_s);
    EXPECT_EQ(plan.planner, "optimal");
  }
}

TEST(SwitchGrouping, ParallelHalvesATransferBoundSwitch) {
  // Transfer-bound, two equal host links and a free peer link: about half the single-route time.
  std::mt19937_64 rng(9);
  std::vector<LayerCost> layers = random_layers(rng, 56, 1e-3, 1e-6);
  double transfer = 0;
  for (const LayerCost& layer : layers) transfer += layer.transfer_s;
  const GroupCosts costs{1e-6, 1e-6};
  const ParallelPlan plan = group_parallel(layers, costs, PeerRoute{1e-6, 1, 1e-6, 1e-3});
  EXPECT_GT(plan.peer_groups(), 0u);
  EXPECT_LT(plan.completion_s, 0.6 * group_optimally(layers, costs).completion_s);
  EXPECT_GE(plan.completion_s, 0.5 * transfer);
}

TEST(SwitchGrouping, ParallelTimelineAndBadRoutes) {
  const std::vector<LayerCost> layers = {{"a", 100, 1.0, 0.5}, {"b", 100, 2.0, 0.25}};
  const GroupCosts costs{0.125, 0.0625};
  const PeerRoute peer{0.25, 1.0, 0.125, 0.5};
  const std::vector<size_t> ends = {1, 2};
  const std::vector<Route> routes = {Route::kHost, Route::kPeer};
  const ParallelTimeline t = simulate_parallel_switch(layers, costs, peer, ends, routes);
  ASSERT_EQ(t.copies.size(), 1u);
  ASSERT_EQ(t.peer_copies.size(), 1u);
  ASSERT_EQ(t.peer_forwards.size(), 1u);
  EXPECT_DOUBLE_EQ(t.copies[0].end_s, 1.125);
  EXPECT_DOUBLE_EQ(t.peer_copies[0].start_s, 0.0);  // the two host links run at once
  EXPECT_DOUBLE_EQ(t.peer_copies[0].end_s, 2.25);
  EXPECT_DOUBLE_EQ(t.peer_forwards[0].end_s, 2.25 + 0.125 + 1.0);
  EXPECT_DOUBLE_EQ(t.computes[1].start_s, 3.375 + 0.0625);
  EXPECT_DOUBLE_EQ(t.completion_s, 3.4375 + 0.25);
  EXPECT_THROW(simulate_parallel_switch(layers, costs, peer, ends, std::vector<Route>{}), Error);
  EXPECT_THROW(simulate_parallel_switch(layers, costs, PeerRoute{0, 0, 0, 0.5}, ends, routes),
               Error);
  EXPECT_THROW(group_parallel(layers, costs, PeerRoute{-1, 1, 0, 0.5}), Error);
}

}  // namespace
}  // namespace ferry::switch_
