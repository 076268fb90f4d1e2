// Parallel transmission through a peer device (see parallel_switch.h).
#include "ferry/switch/parallel_switch.h"

#include <cstdint>

#include "ferry/autograd/grad_mode.h"
#include "ferry/core/error.h"
#include "ferry/device/guard.h"
#include "ferry/device/runtime.h"
#include "ferry/memory/memory_resource.h"
#include "ferry/ops/factories.h"

namespace ferry::switch_ {
namespace {

Stream other_stream(Device device, const Stream& than) {
  Stream stream = get_stream_from_pool(device);
  while (stream == than) stream = get_stream_from_pool(device);
  return stream;
}

void check_streams(const SwitchStreams& streams, const PeerStreams& peer, const Tensor& input) {
  FERRY_CHECK(!streams.copy.is_cpu() && !streams.compute.is_cpu() && !peer.host.is_cpu() &&
                  !peer.link.is_cpu() && !peer.arrive.is_cpu(),
              "switch_in_parallel: expected device streams, got ", streams.copy, ", ",
              streams.compute, ", ", peer.host, ", ", peer.link, " and ", peer.arrive);
  const Device device = streams.compute.device();
  FERRY_CHECK(streams.copy.device() == device && peer.arrive.device() == device,
              "switch_in_parallel: expected the copy, compute and arrive streams on one device, "
              "got ",
              streams.copy, ", ", streams.compute, " and ", peer.arrive);
  FERRY_CHECK(peer.host.device() == peer.link.device() && peer.host.device() != device,
              "switch_in_parallel: expected the peer's host and link streams on one device other "
              "than ",
              device, ", got ", peer.host, " and ", peer.link);
  FERRY_CHECK(!(streams.copy == streams.compute) && !(streams.copy == peer.arrive) &&
                  !(streams.compute == peer.arrive) && !(peer.host == peer.link),
              "switch_in_parallel: expected different streams, got copy ", streams.copy,
              ", compute ", streams.compute, ", arrive ", peer.arrive, ", peer host ", peer.host,
              ", peer link ", peer.link);
  FERRY_CHECK(input.defined() && input.device() == device,
              "switch_in_parallel: expected the input on ", device, ", got ",
              input.defined() ? input.device().str() : std::string("none"));
}

}  // namespace

PeerStreams peer_streams(Device peer, Device target) {
  FERRY_CHECK(!peer.is_cpu() && !target.is_cpu() && peer != target,
              "peer_streams: expected two different devices, got ", peer, " and ", target);
  PeerStreams streams;
  streams.host = get_stream_from_pool(peer);
  streams.link = other_stream(peer, streams.host);
  streams.arrive = get_stream_from_pool(target);
  (void)enable_peer_access(peer, target);
  return streams;
}

QueuedSwitch switch_in_parallel(const ModelImage& image, const std::vector<SwitchLayer>& layers,
                                std::span<const size_t> group_ends, std::span<const Route> routes,
                                const Tensor& input, const SwitchStreams& streams,
                                const PeerStreams& peer) {
  check_streams(streams, peer, input);
  FERRY_CHECK(image.layer_count() == layers.size(), "switch_in_parallel: expected the ",
              image.layer_count(), " layers the image was built from, got ", layers.size());
  check_grouping(group_ends, layers.size());
  FERRY_CHECK(routes.size() == group_ends.size(),
              "switch_in_parallel: expected one route per "
              "group (",
              group_ends.size(), "), got ", routes.size());
  const Device device = streams.compute.device();
  NoGradGuard no_grad;

  // Each group's byte range of the image, and where the peer groups sit in the staging block.
  struct Range {
    int64_t offset = 0, length = 0, staged_at = 0;
  };
  std::vector<Range> ranges(group_ends.size());
  int64_t staging_bytes = 0;
  for (size_t g = 0, first = 0; g < group_ends.size(); first = group_ends[g++]) {
    const size_t begin = image.layer_begin(first);
    const size_t end = image.layer_end(group_ends[g] - 1);
    if (end <= begin) continue;
    ranges[g] = {static_cast<int64_t>(begin), static_cast<int64_t>(end - begin), staging_bytes};
    if (routes[g] == Route::kPeer) staging_bytes += ranges[g].length;
  }

  QueuedSwitch queued;
  if (image.nbytes() > 0) {
    StreamGuard on_compute(streams.compute);
    queued.block =
        empty({static_cast<int64_t>(image.nbytes())}, TensorOptions().dtype(kUInt8).device(device));
  }
  if (staging_bytes > 0) {
    StreamGuard on_host(peer.host);
    queued.staging =
        empty({staging_bytes}, TensorOptions().dtype(kUInt8).device(peer.host.device()));
    memory::record_stream(queued.staging, peer.link);
  }
  // Both writers of the block start after what the compute stream has queued so far (the
  // peer's link stream through copy_'s handshake with `arrive`), and the block outlives both.
  streams.copy.wait_stream(streams.compute);
  peer.arrive.wait_stream(streams.compute);
  if (queued.block.defined()) {
    memory::record_stream(queued.block, streams.copy);
    memory::record_stream(queued.block, peer.arrive);
  }
  image.bind(queued.block);

  std::vector<size_t> group_arrival(group_ends.size(), SIZE_MAX);
  for (size_t g = 0; g < group_ends.size(); ++g) {
    const Range& r = ranges[g];
    if (r.length == 0) continue;
    Tensor target = queued.block.narrow(0, r.offset, r.length);
    const Tensor source = image.host().narrow(0, r.offset, r.length);
    queued.arrivals.emplace_back();
    if (routes[g] == Route::kHost) {
      StreamGuard on_copy(streams.copy);
      target.copy_(source, /*non_blocking=*/true);
      queued.arrivals.back().record(streams.copy);
    } else {
      Tensor staged = queued.staging.narrow(0, r.staged_at, r.length);
      {
        StreamGuard on_host(peer.host);
        staged.copy_(source, /*non_blocking=*/true);
      }
      peer.link.wait_stream(peer.host);
      StreamGuard on_link(peer.link);
      StreamGuard on_arrive(peer.arrive);
      target.copy_(staged, /*non_blocking=*/true);
      queued.arrivals.back().record(peer.link);
    }
    group_arrival[g] = queued.arrivals.size() - 1;
  }

  StreamGuard on_compute(streams.compute);
  Tensor x = input;
  for (size_t g = 0, first = 0; g < group_ends.size(); first = group_ends[g++]) {
    if (group_arrival[g] != SIZE_MAX) streams.compute.wait_event(queued.arrivals[group_arrival[g]]);
    for (size_t i = first; i < group_ends[g]; ++i) x = layers[i].run(x);
  }
  queued.output = x;
  return queued;
}

}  // namespace ferry::switch_
