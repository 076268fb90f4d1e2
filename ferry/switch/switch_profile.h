// Measuring what the grouping planner needs on one device: the host-to-device link (bandwidth
// and the fixed cost of one copy, from pinned memory, as a switch copies), what a compute stream
// pays to see a group's arrival (a device-side event wait; PipeSwitch's host synchronize plus a
// message), and each layer's compute time with its weights resident.
//
// A switch copies a group's weights as one contiguous range of the model's pinned image, so a
// layer's transfer time is its bytes over the measured bandwidth and each group pays the copy's
// fixed cost once. Every figure is the median of `repeats` runs after a warm-up. The link's times
// are host wall-clock around a stream synchronize; a layer's time is the host-clock time the
// stream spent on it while the whole chain was queued at once (host functions between layers),
// as a switch queues it, so a layer the host queues more slowly than the device runs costs the
// queueing time, as it does in a switch.
#pragma once

#include <vector>

#include "ferry/core/device.h"
#include "ferry/core/tensor.h"
#include "ferry/switch/grouping.h"
#include "ferry/switch/parallel_grouping.h"
#include "ferry/switch/switch_layers.h"

namespace ferry::switch_ {

struct LinkProfile {
  double bandwidth_bytes_per_s = 0;  // pinned host -> device, large copies
  double copy_latency_s = 0;         // one small pinned copy, queued and completed
  double device_wait_s = 0;          // an event wait between two streams of the device
  double host_sync_s = 0;            // host waits for an event, then wakes another thread
};

// Measures the link to `device` (a Sim or CUDA device).
LinkProfile measure_link(Device device, int repeats = 5);

// The peer route for parallel transmission from `peer` to `target` (parallel_grouping.h): the
// peer's own host link (as measure_link) and the peer link (a peer copy on a stream of `peer`,
// large for the bandwidth, small for the fixed cost), as ratios to `target_link`'s bandwidth.
PeerRoute measure_peer_route(Device peer, Device target, const LinkProfile& target_link,
                             int repeats = 5);

// Each layer's bytes, transfer time (bytes over the link's bandwidth) and compute time, run in
// order on `input` on `device`'s current stream. The layers' weights must already be on
// `device`, and `input` too. Runs without autograd.
std::vector<LayerCost> profile_layers(const std::vector<SwitchLayer>& layers, const Tensor& input,
                                      const LinkProfile& link, int repeats = 3);

// The per-group costs of ferry's switch (device-side waits) and of PipeSwitch's (host sync and a
// message per group) on a measured link.
GroupCosts ferry_group_costs(const LinkProfile& link);
GroupCosts pipeswitch_group_costs(const LinkProfile& link);

}  // namespace ferry::switch_
