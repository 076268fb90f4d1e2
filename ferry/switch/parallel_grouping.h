// Parallel transmission (DeepPlan, EuroSys'23): a switch that also loads some groups through a
// peer device's own host link and forwards them to the target over the peer link, so two host
// links carry the model at once. The timeline model below extends grouping.h's with a second
// route per group; the planner chooses the groups and each group's route.
//
// The model: groups are consecutive layers, each on one route. Route kHost is grouping.h's copy
// stream (per group copy_overhead_s plus its layers' transfer_s). Route kPeer has two streams
// that each run the peer groups in order: the peer's host link (host_overhead_s + host_scale *
// transfer) into a staging block, then the peer link to the target (link_overhead_s +
// link_scale * transfer), which starts once the group is staged and the previous peer group has
// been forwarded. A group arrives when its last hop ends; the compute stream runs as in
// grouping.h (a layer starts at max(previous layer's end, its group's arrival + wait_s)).
//
// Guarantees: group_parallel's completion_s equals simulate_parallel_switch on its plan, is never
// above group_optimally's, and is at most bound_s = n * resolution above the least completion
// time of all groupings and route choices (a dynamic program over the four stream positions,
// bucketed on a time grid, with lower-bound pruning: Note [Bucketed planner] in the .cc). With
// resolution 0 it is exact (every distinct state kept: exponential, for small models and tests).
// It returns group_optimally's plan, every group on kHost, when there is no peer route, when the
// peer link is not faster than the host link (link_scale >= 1), or when the best parallel plan
// found is not kMinGain (0.1%) faster: the peer's link and memory are costs the model leaves out
// (the plan is then within kMinGain of the single-route time, rather than bound_s, of the optimum).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ferry/switch/grouping.h"

namespace ferry::switch_ {

enum class Route : uint8_t {
  kHost,  // the target's own host link
  kPeer,  // the peer's host link into its staging block, then the peer link to the target
};
inline constexpr double kMinGain = 1e-3;

// "host" or "peer".
const char* route_name(Route route);

// The peer route's costs, relative to the target's host link (LayerCost::transfer_s).
struct PeerRoute {
  double host_overhead_s = 0;  // per group, on the peer's host-to-peer copy stream
  double host_scale = 1;       // the peer's host link time per byte over the target's
  double link_overhead_s = 0;  // per group, on the peer-to-target copy stream
  double link_scale = 1;       // the peer link's time per byte over the target's host link
};

struct ParallelPlan {
  std::vector<size_t> ends;   // as Grouping::ends
  std::vector<Route> routes;  // one per group
  double completion_s = 0;
  std::string planner;  // "parallel" or "optimal" (the single-route plan)
  double bound_s = 0;   // completion_s is at most this much above the optimum

  size_t peer_groups() const;
};

struct ParallelTimeline {
  std::vector<SwitchSpan> copies;         // kHost groups, on the target's copy stream
  std::vector<SwitchSpan> peer_copies;    // kPeer groups, host to the peer's staging block
  std::vector<SwitchSpan> peer_forwards;  // kPeer groups, peer to target
  std::vector<SwitchSpan> computes;       // one per layer
  double completion_s = 0;
};

// Raises ferry::Error unless every time is finite and non-negative and every scale positive.
void check_peer_route(const PeerRoute& peer);

// The timeline of `ends` with `routes` (one route per group; raises ferry::Error otherwise).
ParallelTimeline simulate_parallel_switch(std::span<const LayerCost> layers,
                                          const GroupCosts& costs, const PeerRoute& peer,
                                          std::span<const size_t> ends,
                                          std::span<const Route> routes);

// The plan with (within bound_s) the least completion time over groupings and routes (see above).
// A negative resolution picks default_resolution(layers).
ParallelPlan group_parallel(std::span<const LayerCost> layers, const GroupCosts& costs,
                            const std::optional<PeerRoute>& peer, double resolution_s = -1);

// The total transfer time over 32 times the layer count: bound_s is then 1/32 of the transfer.
double default_resolution(std::span<const LayerCost> layers);

}  // namespace ferry::switch_
