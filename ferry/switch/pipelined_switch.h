// The switch itself, within one process: a model's weights cross from its pinned image into a
// new device block group by group on a copy stream, while the compute stream runs each layer as
// soon as its group has arrived. Everything is queued from the calling thread and nothing waits
// on the host: each group's copy records an event and the compute stream waits for that event on
// the device before the group's first layer (PipeSwitch instead synchronizes a host thread on
// each group and sends the compute process a message).
//
// Stream safety: the copy stream first waits for the compute stream (the new block may be memory
// the compute stream freed a moment ago and still reads), the block is recorded on the copy
// stream (freeing it later waits for the copies), and the pinned image's block is recorded on the
// copy stream by copy_ itself, so neither side can be reused while a copy still reads or writes.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ferry/core/tensor.h"
#include "ferry/device/event.h"
#include "ferry/device/stream.h"
#include "ferry/memory/mem_pool.h"
#include "ferry/switch/direct_layers.h"
#include "ferry/switch/model_image.h"
#include "ferry/switch/switch_layers.h"

namespace ferry::switch_ {

struct SwitchStreams {
  Stream copy;     // carries the weights
  Stream compute;  // runs the layers; the request's input must be ready on it
};

// Two different streams of `device` from its pool, for a switch (and for measuring one).
SwitchStreams switch_streams(Device device);

// How the compute side learns that a group has arrived.
enum class HandOff {
  kDeviceWait,  // ferry: the compute stream waits for the group's event on the device
  kHostSync,    // PipeSwitch: a host thread synchronizes on the event and sends a message; the
                // launching thread blocks on the message before queueing the group's layers
};

// Host-clock times (seconds from the switch's start) at which the streams reached each group's
// copy and each layer, taken by host functions queued on the streams: for timelines only (each
// costs a stream callback).
struct SwitchTrace {
  struct Span {
    std::string name;    // "group 3" or the layer's name
    std::string stream;  // "copy" or "compute"
    double start_s = 0;
    double end_s = 0;
  };
  std::vector<Span> spans;
  // As a Chrome trace (complete events on two named threads), for tools/plot_timeline.py.
  std::string chrome_trace_json(const std::string& process_name) const;
};

struct SwitchOptions {
  HandOff hand_off = HandOff::kDeviceWait;
  // When set, receives the switch's timeline once the compute stream has passed it (call
  // streams.compute.synchronize() before reading it).
  std::shared_ptr<SwitchTrace> trace;
  // When set, the device block for the weights comes from this pool (a worker's parameters
  // sub-region) rather than from the caller's current pool; the layers' activations do not.
  std::optional<memory::MemPool> weights_pool;
  // When set, its direct layers read their weights from the mapped image in place and are not
  // copied (direct host access, direct_layers.h).
  std::shared_ptr<const DirectLayers> direct;
};

struct QueuedSwitch {
  Tensor output;  // on the device, valid once the compute stream has reached it
  Tensor block;   // the device block holding the weights (the model's tensors are views of it)
  // One per group that carried bytes, recorded on the copy stream after the group's copy. Keep
  // them until the compute stream has passed its waits.
  std::vector<Event> arrivals;
  Tensor staging;  // switch_in_parallel only: the peer's staging block (parallel_switch.h)
};

// Binds the model's weights to a new block on the compute stream's device, queues the groups'
// copies (`group_ends` as in grouping.h, over `layers`, which must be the layers `image` was built
// from) and the layers' computation on `input`, and returns without waiting (with kHostSync, once
// the last group has arrived and its layers are queued). Runs without
// autograd. Raises ferry::Error for streams of different devices, the same stream twice, a CPU
// stream, an input on another device, or a grouping of another number of layers.
QueuedSwitch switch_in(const ModelImage& image, const std::vector<SwitchLayer>& layers,
                       std::span<const size_t> group_ends, const Tensor& input,
                       const SwitchStreams& streams, const SwitchOptions& options = {});

// Gives the model's weights back to the pinned image (the module's tensors become host views
// again); the device block is freed when the last reference to it (QueuedSwitch::block, tensors
// still viewing it) is gone, after the work queued on it.
void switch_out(const ModelImage& image);

}  // namespace ferry::switch_
