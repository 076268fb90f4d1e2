// Measuring the link and the layers for the grouping planner (see switch_profile.h).
#include "ferry/switch/switch_profile.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <thread>

#include "ferry/autograd/grad_mode.h"
#include "ferry/core/error.h"
#include "ferry/device/event.h"
#include "ferry/device/guard.h"
#include "ferry/device/ipc.h"
#include "ferry/device/stream.h"
#include "ferry/ops/factories.h"
#include "ferry/switch/parallel_switch.h"
#include "ferry/switch/pipelined_switch.h"

namespace ferry::switch_ {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  FERRY_CHECK(!values.empty(), "switch profile: no measurements");
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

// The median over `repeats` (after one warm-up) of the host time `run` takes.
template <typename Fn>
double median_time(int repeats, Fn&& run) {
  run();
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    const auto start = Clock::now();
    run();
    times.push_back(seconds_since(start));
  }
  return median(std::move(times));
}

Tensor bytes_on(size_t nbytes, Device device, bool pinned = false) {
  return empty({static_cast<int64_t>(nbytes)},
               TensorOptions().dtype(kUInt8).device(device).pinned_memory(pinned));
}

// One small copy on `stream`, then (when given) the event recorded after it.
void small_copy(const Stream& stream, Tensor& dst, const Tensor& src, Event* recorded = nullptr) {
  StreamGuard guard(stream);
  dst.copy_(src, /*non_blocking=*/true);
  if (recorded != nullptr) recorded->record(stream);
}

}  // namespace

LinkProfile measure_link(Device device, int repeats) {
  FERRY_CHECK(!device.is_cpu(), "measure_link: expected a Sim or CUDA device, got ", device);
  FERRY_CHECK(repeats > 0, "measure_link: expected repeats > 0, got ", repeats);
  DeviceGuard device_guard(device);
  constexpr size_t kSmall = 512;
  constexpr size_t kLarge = size_t{64} << 20;
  const SwitchStreams streams = switch_streams(device);
  const Stream& copy_stream = streams.copy;
  const Stream& compute_stream = streams.compute;

  const Tensor host_small = bytes_on(kSmall, Device(kCPU), true).fill_(1);
  const Tensor host_large = bytes_on(kLarge, Device(kCPU), true).fill_(1);
  Tensor device_small = bytes_on(kSmall, device);
  Tensor device_small2 = bytes_on(kSmall, device);
  Tensor device_large = bytes_on(kLarge, device);

  LinkProfile link;
  link.copy_latency_s = median_time(repeats, [&] {
    small_copy(copy_stream, device_small, host_small);
    copy_stream.synchronize();
  });
  const double large_s = median_time(repeats, [&] {
    small_copy(copy_stream, device_large, host_large);
    copy_stream.synchronize();
  });
  link.bandwidth_bytes_per_s =
      static_cast<double>(kLarge - kSmall) / std::max(large_s - link.copy_latency_s, 1e-9);

  // What the compute stream pays to see a group's arrival, both ways measured alike: a small
  // copy on the copy stream, the hand-off, a small copy on the compute stream, a synchronize;
  // against both copies on one stream (no hand-off at all).
  const double one_stream_s = median_time(repeats, [&] {
    small_copy(copy_stream, device_small, host_small);
    small_copy(copy_stream, device_small2, device_small);
    copy_stream.synchronize();
  });
  // ferry: the compute stream waits for the copy stream's event on the device.
  Event arrived;
  const double device_wait_s = median_time(repeats, [&] {
    small_copy(copy_stream, device_small, host_small, &arrived);
    compute_stream.wait_event(arrived);
    small_copy(compute_stream, device_small2, device_small);
    compute_stream.synchronize();
  });
  link.device_wait_s = std::max(0.0, device_wait_s - one_stream_s);

  // PipeSwitch: another host thread synchronizes on the group's event and sends a message; the
  // thread that launches the compute blocks on it, then launches.
  auto [to_waiter, from_waiter] = IpcConnection::pair();
  to_waiter.set_timeout(std::chrono::seconds(30));
  from_waiter.set_timeout(std::chrono::seconds(30));
  Event group_done;
  std::thread waiter([&, waiter_end = std::move(from_waiter)]() mutable {
    try {
      while (waiter_end.receive_value<char>() != 0) {
        group_done.synchronize();
        waiter_end.send_value<char>(1);
      }
    } catch (const Error&) {
      // The measuring side failed and closed its end; it reports the error.
    }
  });
  double host_sync_s = 0;
  try {
    host_sync_s = median_time(repeats, [&] {
      small_copy(copy_stream, device_small, host_small, &group_done);
      to_waiter.send_value<char>(1);
      (void)to_waiter.receive_value<char>();
      small_copy(compute_stream, device_small2, device_small);
      compute_stream.synchronize();
    });
    to_waiter.send_value<char>(0);
  } catch (...) {
    to_waiter.close();
    waiter.join();
    throw;
  }
  waiter.join();
  link.host_sync_s = std::max(0.0, host_sync_s - one_stream_s);
  return link;
}

PeerRoute measure_peer_route(Device peer, Device target, const LinkProfile& target_link,
                             int repeats) {
  FERRY_CHECK(target_link.bandwidth_bytes_per_s > 0,
              "measure_peer_route: expected a measured target link bandwidth > 0, got ",
              target_link.bandwidth_bytes_per_s);
  const LinkProfile host = measure_link(peer, repeats);
  const PeerStreams streams = peer_streams(peer, target);
  constexpr size_t kSmall = 512;
  constexpr size_t kLarge = size_t{64} << 20;
  const Tensor from_small = bytes_on(kSmall, peer).fill_(1);
  const Tensor from_large = bytes_on(kLarge, peer).fill_(1);
  Tensor to_small = bytes_on(kSmall, target);
  Tensor to_large = bytes_on(kLarge, target);
  // The fills ran on the peer's current stream, and the blocks were allocated on the current
  // streams: the link and arrival streams must not touch them before that work is done.
  current_stream(peer).synchronize();
  current_stream(target).synchronize();
  const auto forward = [&](Tensor& dst, const Tensor& src) {
    {
      StreamGuard on_link(streams.link);
      StreamGuard on_arrive(streams.arrive);
      dst.copy_(src, /*non_blocking=*/true);
    }
    streams.arrive.synchronize();
  };
  const double small_s = median_time(repeats, [&] { forward(to_small, from_small); });
  const double large_s = median_time(repeats, [&] { forward(to_large, from_large); });
  const double peer_bandwidth =
      static_cast<double>(kLarge - kSmall) / std::max(large_s - small_s, 1e-9);
  PeerRoute route;
  route.host_overhead_s = host.copy_latency_s;
  route.host_scale = target_link.bandwidth_bytes_per_s / host.bandwidth_bytes_per_s;
  route.link_overhead_s = small_s;
  route.link_scale = target_link.bandwidth_bytes_per_s / peer_bandwidth;
  return route;
}

std::vector<LayerCost> profile_layers(const std::vector<SwitchLayer>& layers, const Tensor& input,
                                      const LinkProfile& link, int repeats) {
  FERRY_CHECK(repeats > 0, "profile_layers: expected repeats > 0, got ", repeats);
  FERRY_CHECK(link.bandwidth_bytes_per_s > 0,
              "profile_layers: expected a measured link bandwidth > 0, got ",
              link.bandwidth_bytes_per_s);
  NoGradGuard no_grad;
  const Stream stream = current_stream(input.device());
  // Each layer's input, from one run of the whole chain (which also warms every kernel up).
  std::vector<Tensor> inputs{input};
  for (const SwitchLayer& layer : layers) inputs.push_back(layer.run(inputs.back()));
  stream.synchronize();

  // Each run queues the whole chain, as a switch does, with a host function between layers that
  // notes when the stream got there: a layer's time is what the stream spent on it, without a
  // synchronize per layer (which would add the host's round trip to every layer).
  const size_t n = layers.size();
  std::vector<std::vector<double>> samples(n);
  for (int r = 0; r < repeats; ++r) {
    auto stamps = std::make_shared<std::vector<Clock::time_point>>(n + 1);
    enqueue_host_function(stream, [stamps] { (*stamps)[0] = Clock::now(); });
    for (size_t i = 0; i < n; ++i) {
      (void)layers[i].run(inputs[i]);
      enqueue_host_function(stream, [stamps, i] { (*stamps)[i + 1] = Clock::now(); });
    }
    stream.synchronize();
    for (size_t i = 0; i < n; ++i) {
      samples[i].push_back(std::chrono::duration<double>((*stamps)[i + 1] - (*stamps)[i]).count());
    }
  }
  std::vector<LayerCost> costs;
  for (size_t i = 0; i < n; ++i) {
    LayerCost cost;
    cost.name = layers[i].name;
    cost.bytes = weight_bytes(*layers[i].module);
    cost.transfer_s = static_cast<double>(cost.bytes) / link.bandwidth_bytes_per_s;
    cost.compute_s = median(std::move(samples[i]));
    costs.push_back(std::move(cost));
  }
  return costs;
}

GroupCosts ferry_group_costs(const LinkProfile& link) {
  return {link.copy_latency_s, link.device_wait_s};
}

GroupCosts pipeswitch_group_costs(const LinkProfile& link) {
  return {link.copy_latency_s, link.host_sync_s};
}

}  // namespace ferry::switch_
