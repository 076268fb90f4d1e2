// One request of a ServedModel on a device, with its weights resident or switched in behind a
// pipelined switch_in: the part of a request that the in-process SwitchingHandler and a serve
// worker process share, and the profiling that plans a model's switch on a device.
// Guarantees: the outputs are on the host, contiguous, and equal bit for bit to the model's own
// forward on the device; the streams are idle when run_on_device returns or raises; a switch
// that fails leaves the model's weights back in its pinned image (not resident), so the caller
// only has its own bookkeeping to undo.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ferry/core/tensor.h"
#include "ferry/switch/direct_plan.h"
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
// plan->grouping's groups while the request computes, the layers plan->direct marks reading their
// weights in place from the image mapped into the device (direct host access), never copied.
// Transfer is the input and output copies plus, for a switch, the time until the last group has
// arrived; compute is the rest. Runs without autograd.
//
// With `should_stop` given (a run of resident weights only), the layers are queued one at a
// time, a layer queued only once the one before the last has finished (one running, one
// waiting), and `should_stop` is asked before each: once it says
// yes the run ends between two layers with SwitchError(preempted) naming them, the streams idle.
DeviceRun run_on_device(ServedModel& model, std::vector<Tensor> inputs,
                        const SwitchStreams& streams, const DirectPlan* plan,
                        const SwitchOptions& options = {},
                        const std::function<bool()>& should_stop = {});

// Copies the whole image into a new block on streams.compute's device and binds the model to it,
// waiting for the copy: for profiling and preloading, outside any request. Returns the block.
Tensor bind_whole_image(const ModelImage& image, const SwitchStreams& streams);

// Which layers a switch may read in place from pinned host memory.
enum class DirectAccess {
  kAuto,  // where plan_direct finds that it wins
  kOff,   // none: every weight is copied (group_optimally's plan)
  kAll,   // every layer with weights (for experiments and tests), grouped optimally around them
};
// "auto", "off", "all"; raises ConfigError for anything else.
DirectAccess parse_direct_access(const std::string& text);

// Profiles `model`'s layers on streams.compute's device (its weights there for the while, then
// back in the image) on its example input, resident and read in place from the mapped image, and
// returns the plan for `link`: with kAuto plan_direct's (the direct layers where they win).
DirectPlan plan_switch(ServedModel& model, const SwitchStreams& streams, const LinkProfile& link,
                       int repeats, DirectAccess access = DirectAccess::kAuto);

}  // namespace ferry::switch_
