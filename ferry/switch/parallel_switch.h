// Parallel transmission, the mechanism: switch_in with a second route. Groups on Route::kHost
// cross the target's own host link on the copy stream, as in switch_in; groups on Route::kPeer
// cross a peer device's host link into a staging block on the peer (the peer's host stream),
// then the peer link into the target's block (the peer's link stream, a peer copy through
// copy_). The compute stream waits on the device for each group's arrival event, on either
// route; nothing waits on the host.
//
// Stream safety, beyond switch_in's: the peer's link stream waits for the host stream after
// each staged group; the target block's writes from the peer start after the target's `arrive`
// stream, which first waits for the compute stream (copy_'s cross-device handshake), and the
// block is recorded on `arrive`, which waits for every forward, so it is not reused before they
// are done. Each peer group has its own range of the staging block (no reuse within a switch);
// the block is allocated on the host stream and recorded on the link stream, so a later switch
// cannot reuse it before this one's forwards have read it.
#pragma once

#include <span>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/device/stream.h"
#include "ferry/switch/parallel_grouping.h"
#include "ferry/switch/pipelined_switch.h"

namespace ferry::switch_ {

struct PeerStreams {
  Stream host;    // on the peer: pinned image -> staging block
  Stream link;    // on the peer: staging block -> target block (peer copies)
  Stream arrive;  // on the target: the peer copies' destination-side stream
};

// Three streams from the pools (host and link distinct on `peer`, arrive on `target`), and peer
// access from `peer` to `target` turned on where the runtime allows it (else copy_ stages the
// forwards through the host, still correct). Raises ferry::Error when peer == target or either
// is a CPU device.
PeerStreams peer_streams(Device peer, Device target);

// As switch_in (kDeviceWait, no trace), with `routes` giving each group's route. The returned
// QueuedSwitch also holds the staging block. Raises ferry::Error for the cases switch_in does,
// for a route count that is not the group count, and for peer streams on the wrong devices, or
// the same stream twice.
QueuedSwitch switch_in_parallel(const ModelImage& image, const std::vector<SwitchLayer>& layers,
                                std::span<const size_t> group_ends, std::span<const Route> routes,
                                const Tensor& input, const SwitchStreams& streams,
                                const PeerStreams& peer);

}  // namespace ferry::switch_
