// Grouping a model's layers for pipelined transmission (PipeSwitch's "model-aware grouping"):
// the timeline of one switch, and the planners that choose the groups.
//
// The model of a switch: the groups are copied in order, back to back, on one copy stream; each
// group costs `copy_overhead_s` on that stream besides its layers' transfer times (one batched
// copy, its launch and the link's latency, an event record). The compute stream runs the layers
// in order; a layer starts once the layer before it has finished and its group has arrived plus
// `wait_s` (the time from a group's arrival to the compute stream seeing it: a device-side event
// wait for ferry, a host synchronize and a message per group for PipeSwitch).
//
// Guarantees: group_optimally returns a grouping with the least completion time of all 2^(n-1)
// groupings under this model (exact dynamic programming, O(n^3) time, O(n^2) memory), and every
// planner's completion_s equals simulate_switch on its groups. Inputs are checked: a negative,
// infinite or NaN time raises ferry::Error naming the layer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ferry::switch_ {

struct LayerCost {
  std::string name;
  uint64_t bytes = 0;     // the layer's weights (parameters and buffers)
  double transfer_s = 0;  // copying them alone, without the per-group overhead
  double compute_s = 0;   // running the layer once its weights are on the device
};

struct GroupCosts {
  double copy_overhead_s = 0;  // per group, on the copy stream
  double wait_s = 0;           // per group, from arrival to the compute stream seeing it
};

// A grouping as the exclusive end of each group, increasing, the last equal to the layer count:
// {3, 7, 9} is [0, 3), [3, 7), [7, 9). No layers: no groups, completion 0.
struct Grouping {
  std::vector<size_t> ends;
  double completion_s = 0;  // from the first copy's start to the last layer's end
  std::string planner;      // which planner chose it ("optimal", "pipeswitch", ...)
  bool exhaustive = true;   // false when a bounded search stopped before it had seen everything
};

struct SwitchSpan {
  size_t group = 0;
  size_t layer = 0;  // for a copy span: the group's first layer
  double start_s = 0;
  double end_s = 0;
};

struct SwitchTimeline {
  std::vector<SwitchSpan> copies;    // one per group, on the copy stream
  std::vector<SwitchSpan> computes;  // one per layer, on the compute stream
  double completion_s = 0;
};

// Raises ferry::Error unless every time is finite and non-negative.
void check_costs(std::span<const LayerCost> layers, const GroupCosts& costs);
// Raises ferry::Error unless `ends` is a grouping of `layer_count` layers (see Grouping).
void check_grouping(std::span<const size_t> ends, size_t layer_count);

SwitchTimeline simulate_switch(std::span<const LayerCost> layers, const GroupCosts& costs,
                               std::span<const size_t> ends);

// The running time when every weight is already on the device (the "ready" case).
double ready_time(std::span<const LayerCost> layers);

// The grouping with the least completion time (exact).
Grouping group_optimally(std::span<const LayerCost> layers, const GroupCosts& costs);

// PipeSwitch's search: first groups tried in order of size, a branch pruned when a lower bound
// of its completion cannot beat the best found, and a group never closed while its copy would
// arrive before the compute stream is free (PipeSwitch's merge rule, which can miss the optimum
// when the per-group overhead is large). Stops after `max_branches` branches
// (exhaustive = false then) with the best grouping seen.
Grouping group_like_pipeswitch(std::span<const LayerCost> layers, const GroupCosts& costs,
                               uint64_t max_branches = 10'000'000);

// One group per layer (per-layer pipelining), and one group for everything (load, then run).
Grouping group_per_layer(std::span<const LayerCost> layers, const GroupCosts& costs);
Grouping group_all_at_once(std::span<const LayerCost> layers, const GroupCosts& costs);

// The layer names of each group, for explain-switch: "conv1..layer1.2 (12.1 MB)".
std::vector<std::string> describe_groups(std::span<const LayerCost> layers,
                                         std::span<const size_t> ends);

}  // namespace ferry::switch_
