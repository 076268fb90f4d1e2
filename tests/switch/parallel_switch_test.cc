// Parallel transmission on two sim devices: a model switched into sim:0 with some groups through
// sim:1 (its host link, a staging block, then a peer copy) computes the resident model's output
// bit for bit, for several route choices, with and without peer access, and under a slow link
// with chaos (a missing wait shows as a wrong answer); bad streams and routes are refused.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "ferry/autograd/grad_mode.h"
#include "ferry/backends/sim/sim.h"
#include "ferry/core/error.h"
#include "ferry/device/guard.h"
#include "ferry/device/stream.h"
#include "ferry/switch/model_image.h"
#include "ferry/switch/parallel_switch.h"
#include "ferry/switch/zoo_model.h"
#include "tests/support/random.h"
#include "tests/support/tensor_compare.h"
#include "tests/switch/switch_plan_util.h"

namespace ferry::switch_ {
namespace parallel_switch_test {

const Device kSim0("sim:0");
const Device kSim1("sim:1");
using testing::output_on;
using testing::reference_output;

class ParallelSwitch : public ::testing::Test {
 protected:
  void TearDown() override { sim::configure(sim::SimConfig{}); }
};

TEST_F(ParallelSwitch, OutputEqualsTheResidentModelForEveryRouteChoice) {
  const uint64_t seed = ferry::testing::test_seed();
  SCOPED_TRACE(ferry::testing::seed_trace());
  std::mt19937_64 rng = ferry::testing::test_rng();
  for (const auto peer_mode : {sim::SimConfig::PeerMode::kAll, sim::SimConfig::PeerMode::kNone}) {
    sim::SimConfig config;
    config.peer_mode = peer_mode;
    sim::configure(config);
    SCOPED_TRACE(peer_mode == sim::SimConfig::PeerMode::kAll ? "peer access" : "no peer access");
    const ZooInputShape shape{1, 32, 8};  // small: the test runs under the sanitizers too
    ZooModel model = make_zoo_model("resnet18", seed, shape);
    const Tensor input = model.example_input(kSim0, seed);
    const Tensor expected = reference_output("resnet18", seed, shape, input);
    const ModelImage image(model.layers);
    const SwitchStreams streams = switch_streams(kSim0);
    const PeerStreams peer = peer_streams(kSim1, kSim0);
    const size_t n = model.layers.size();
    std::vector<size_t> ends;
    for (size_t i = 1; i <= n; ++i) ends.push_back(i);
    std::vector<std::vector<Route>> choices = {
        std::vector<Route>(n, Route::kPeer), std::vector<Route>(n, Route::kHost), {}};
    for (size_t g = 0; g < n; ++g) choices[2].push_back(rng() % 2 ? Route::kPeer : Route::kHost);
    for (const auto& routes : choices) {
      QueuedSwitch queued =
          switch_in_parallel(image, model.layers, ends, routes, input, streams, peer);
      EXPECT_EQ(model.module->named_parameters()[0].value().device(), kSim0);
      EXPECT_ALL_CLOSE(output_on(streams, queued), expected, 0.0, 0.0);
      streams.compute.synchronize();
      switch_out(image);
    }
    // Two groups, one per route.
    const std::vector<size_t> halves = {n / 2, n};
    QueuedSwitch queued =
        switch_in_parallel(image, model.layers, halves,
                           std::vector<Route>{Route::kPeer, Route::kHost}, input, streams, peer);
    EXPECT_EQ(queued.staging.device(), kSim1);
    EXPECT_ALL_CLOSE(output_on(streams, queued), expected, 0.0, 0.0);
    streams.compute.synchronize();
    switch_out(image);
  }
}

TEST_F(ParallelSwitch, SlowLinksWithChaosReturnAtOnceAndStillComputeRight) {
  const uint64_t seed = ferry::testing::test_seed();
  SCOPED_TRACE(ferry::testing::seed_trace());
  const ZooInputShape shape{2, 224, 16};
  ZooModel model = make_zoo_model("bert-tiny", seed, shape);
  const Tensor input = model.example_input(kSim0, seed);
  const Tensor expected = reference_output("bert-tiny", seed, shape, input);
  const ModelImage image(model.layers);

  sim::SimConfig slow;
  // About a second for the whole image on each host link: every layer waits for real.
  slow.bandwidth[static_cast<int>(sim::Link::HostToDevice)] = static_cast<double>(image.nbytes());
  slow.bandwidth[static_cast<int>(sim::Link::Peer)] = 4.0 * static_cast<double>(image.nbytes());
  slow.chaos_seed = seed;
  slow.chaos_max_delay = std::chrono::microseconds(300);
  sim::configure(slow);

  const SwitchStreams streams = switch_streams(kSim0);
  const PeerStreams peer = peer_streams(kSim1, kSim0);
  const std::vector<size_t> per_layer = {1, 2, 3, 4};
  const std::vector<Route> routes = {Route::kPeer, Route::kHost, Route::kPeer, Route::kHost};
  QueuedSwitch queued =
      switch_in_parallel(image, model.layers, per_layer, routes, input, streams, peer);
  EXPECT_FALSE(peer.link.query()) << "switch_in_parallel waited for the copies on the host";
  EXPECT_EQ(queued.arrivals.size(), 4u);
  EXPECT_ALL_CLOSE(output_on(streams, queued), expected, 0.0, 0.0);
}

TEST_F(ParallelSwitch, BadStreamsAndRoutesAreRefused) {
  ZooModel model = make_zoo_model("bert-tiny", 0, {1, 224, 8});
  const ModelImage image(model.layers);
  const SwitchStreams streams = switch_streams(kSim0);
  const PeerStreams peer = peer_streams(kSim1, kSim0);
  const Tensor input = model.example_input(kSim0);
  const std::vector<size_t> one_group = {model.layers.size()};
  const std::vector<Route> one_route = {Route::kPeer};
  EXPECT_THROW(peer_streams(kSim0, kSim0), Error);
  EXPECT_THROW(switch_in_parallel(image, model.layers, one_group, std::vector<Route>{}, input,
                                  streams, peer),
               Error);
  // The peer's streams on the target itself, or the arrive stream on the peer.
  EXPECT_THROW(switch_in_parallel(image, model.layers, one_group, one_route, input, streams,
                                  {streams.copy, peer.link, peer.arrive}),
               Error);
  EXPECT_THROW(switch_in_parallel(image, model.layers, one_group, one_route, input, streams,
                                  {peer.host, peer.link, peer.host}),
               Error);
  EXPECT_THROW(switch_in_parallel(image, model.layers, one_group, one_route, input, streams,
                                  {peer.host, peer.host, peer.arrive}),
               Error);
  EXPECT_THROW(
      switch_in_parallel(image, model.layers, one_group, one_route, input.cpu(), streams, peer),
      Error);
}

}  // namespace parallel_switch_test
}  // namespace ferry::switch_
