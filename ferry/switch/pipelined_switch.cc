// Pipelined model transmission with device-side waits (see pipelined_switch.h).
#include "ferry/switch/pipelined_switch.h"

#include "ferry/autograd/grad_mode.h"
#include "ferry/core/error.h"
#include "ferry/device/guard.h"
#include "ferry/memory/memory_resource.h"
#include "ferry/ops/factories.h"
#include "ferry/switch/grouping.h"

namespace ferry::switch_ {

QueuedSwitch switch_in(const ModelImage& image, const std::vector<SwitchLayer>& layers,
                       std::span<const size_t> group_ends, const Tensor& input,
                       const SwitchStreams& streams) {
  FERRY_CHECK(!streams.copy.is_cpu() && !streams.compute.is_cpu(),
              "switch_in: expected device streams, got ", streams.copy, " and ", streams.compute);
  FERRY_CHECK(streams.copy.device() == streams.compute.device(),
              "switch_in: expected the copy and compute streams on one device, got ", streams.copy,
              " and ", streams.compute);
  FERRY_CHECK(!(streams.copy == streams.compute), "switch_in: expected two different streams, got ",
              streams.copy, " twice");
  const Device device = streams.compute.device();
  FERRY_CHECK(input.defined() && input.device() == device, "switch_in: expected the input on ",
              device, ", got ", input.defined() ? input.device().str() : std::string("none"));
  FERRY_CHECK(image.layer_count() == layers.size(), "switch_in: expected the ", image.layer_count(),
              " layers the image was built from, got ", layers.size());
  check_grouping(group_ends, layers.size());

  NoGradGuard no_grad;
  QueuedSwitch queued;
  if (image.nbytes() > 0) {
    StreamGuard on_compute(streams.compute);
    queued.block =
        empty({static_cast<int64_t>(image.nbytes())}, TensorOptions().dtype(kUInt8).device(device));
  }
  // The copy stream writes a block that belongs to the compute stream: it starts after what the
  // compute stream has queued so far (which may still use the memory under its old owner), and
  // the block is not reused before the copies are done.
  streams.copy.wait_stream(streams.compute);
  if (queued.block.defined()) memory::record_stream(queued.block, streams.copy);
  image.bind(queued.block);

  // Every copy first, so the copy stream runs ahead; then every layer, each group behind its
  // event.
  std::vector<size_t> group_arrival(group_ends.size(), SIZE_MAX);
  {
    StreamGuard on_copy(streams.copy);
    queued.arrivals.reserve(group_ends.size());
    size_t first = 0;
    for (size_t g = 0; g < group_ends.size(); ++g) {
      const size_t begin = image.layer_begin(first);
      const size_t end = image.layer_end(group_ends[g] - 1);
      first = group_ends[g];
      if (end <= begin) continue;
      const auto offset = static_cast<int64_t>(begin);
      const auto length = static_cast<int64_t>(end - begin);
      queued.block.narrow(0, offset, length)
          .copy_(image.host().narrow(0, offset, length), /*non_blocking=*/true);
      queued.arrivals.emplace_back();
      queued.arrivals.back().record(streams.copy);
      group_arrival[g] = queued.arrivals.size() - 1;
    }
  }
  StreamGuard on_compute(streams.compute);
  Tensor x = input;
  size_t first = 0;
  for (size_t g = 0; g < group_ends.size(); ++g) {
    if (group_arrival[g] != SIZE_MAX) streams.compute.wait_event(queued.arrivals[group_arrival[g]]);
    for (size_t i = first; i < group_ends[g]; ++i) x = layers[i].run(x);
    first = group_ends[g];
  }
  queued.output = x;
  return queued;
}

void switch_out(const ModelImage& image) { image.bind_host(); }

}  // namespace ferry::switch_
