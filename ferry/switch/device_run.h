// One request of a ServedModel on a device, with its weights resident or switched in behind a
// pipelined switch_in: the part of a request that the in-process SwitchingHandler and a serve
// worker process share, and the profiling that plans a model's switch on a device.
// Guarantees: the outputs are on the host, contiguous, and equal bit for bit to the model's own
// forward on the device; the streams are idle when run_on_device returns or raises; a switch
// that fails leaves the model's weights back in its pinned image (not resident), so the caller
// only has its own bookkeeping to undo.
#pragma once

#include <functional>
#include <vector>

#include "ferry/core/tensor.h"
#include "ferry/switch/grouping.h"
#include "ferry/switch/pipelined_switch.h"
#include "ferry/switch/served_model.h"
#include "ferry/switch/switch_profile.h"
#include "ferry/switch/types.h"

namespace ferry::switch_ {

struct DeviceRun {
  std::vector<NamedTensor> outputs;  // on the host, contiguous
  Timings timings;                   // transfer and compute; queue is the caller's to fill
  Tensor block;                      // after a switch: the device block the weights view
  double switch_ms = 0;              // after a switch: from its start to the outputs
};

// Runs `model` on `inputs` (match_inputs' tensors, on the host) on streams.compute's device.
// With `plan` null the weights must already be there; otherwise they are switched in with
// plan->ends while the request computes. Transfer is the input and output copies plus, for a
// switch, the time until the last group has arrived; compute is the rest. Runs without autograd.
//
// With `should_stop` given (a run of resident weights only), the layers are queued one at a
// time, a layer queued only once the one before the last has finished (one running, one
// waiting), and `should_stop` is asked before each: once it says
// yes the run ends between two layers with SwitchError(preempted) naming them, the streams idle.
DeviceRun run_on_device(ServedModel& model, std::vector<Tensor> inputs,
                        const SwitchStreams& streams, const Grouping* plan,
                        const SwitchOptions& options = {},
                        const std::function<bool()>& should_stop = {});

// Copies the whole image into a new block on streams.compute's device and binds the model to it,
// waiting for the copy: for profiling and preloading, outside any request. Returns the block.
Tensor bind_whole_image(const ModelImage& image, const SwitchStreams& streams);

// Profiles `model`'s layers on streams.compute's device (its weights there for the while, then
// back in the image) on its example input and returns the optimal grouping for `link`.
Grouping plan_switch(ServedModel& model, const SwitchStreams& streams, const LinkProfile& link,
                     int repeats);

}  // namespace ferry::switch_
