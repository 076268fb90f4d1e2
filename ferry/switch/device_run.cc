// Running a served model's request on a device, resident or switched in (device_run.h).
#include "ferry/switch/device_run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>

#include "ferry/autograd/grad_mode.h"
#include "ferry/device/event.h"
#include "ferry/device/guard.h"
#include "ferry/ops/factories.h"
#include "ferry/switch/direct_layers.h"
#include "ferry/switch/model_config.h"

namespace ferry::switch_ {
namespace {

using RunClock = std::chrono::steady_clock;

// The layers one at a time, each queued once the one before the last has finished (one running,
// one waiting), asking `should_stop` first.
std::vector<NamedTensor> run_stoppable(ServedModel& model, const std::vector<Tensor>& inputs,
                                       const SwitchStreams& streams,
                                       const std::function<bool()>& should_stop) {
  const std::vector<SwitchLayer>& layers = model.layers();
  Tensor x = model.begin_run(inputs);
  std::deque<Event> queued;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (should_stop()) {
      streams.compute.synchronize();
      throw SwitchError(ErrorCode::preempted,
                        detail::str_cat("model '", model.name(), "' was preempted after ", i,
                                        " of its ", layers.size(), " layers"));
    }
    x = layers[i].run(x);
    queued.emplace_back();
    queued.back().record(streams.compute);
    if (queued.size() > 1) {
      queued.front().synchronize();
      queued.pop_front();
    }
  }
  return model.end_run(x);
}

}  // namespace

Tensor bind_whole_image(const ModelImage& image, const SwitchStreams& streams) {
  if (image.nbytes() == 0) return Tensor();
  const Device device = streams.compute.device();
  StreamGuard on_compute(streams.compute);
  Tensor block =
      empty({static_cast<int64_t>(image.nbytes())}, TensorOptions().dtype(kUInt8).device(device));
  block.copy_(image.host(), /*non_blocking=*/true);
  streams.compute.synchronize();
  image.bind(block);
  return block;
}

DirectAccess parse_direct_access(const std::string& text) {
  if (text == "auto") return DirectAccess::kAuto;
  if (text == "off") return DirectAccess::kOff;
  if (text == "all") return DirectAccess::kAll;
  throw ConfigError("--direct-access: expected auto, off or all, but got \"" + text + "\"");
}

DirectPlan plan_switch(ServedModel& model, const SwitchStreams& streams, const LinkProfile& link,
                       int repeats, DirectAccess access) {
  autograd::NoGradGuard no_grad;
  const Device device = streams.compute.device();
  DeviceGuard device_guard(device);
  Tensor block = bind_whole_image(model.image(), streams);
  std::vector<LayerCost> costs;
  std::vector<double> extra;
  {
    StreamGuard on_compute(streams.compute);
    const Tensor input = model.example_input(device);
    costs = profile_layers(model.layers(), input, link, repeats);
    if (model.image().nbytes() > 0 && access != DirectAccess::kOff) {
      const Tensor mapped = map_image(model.image(), device);
      extra =
          profile_direct_extra(model.image(), mapped, model.layers(), input, link, costs, repeats);
    } else {
      extra.assign(costs.size(), std::numeric_limits<double>::infinity());
    }
    streams.compute.synchronize();
  }
  model.end_run(Tensor());  // forgets what the layers left behind
  switch_out(model.image());
  const GroupCosts group_costs = ferry_group_costs(link);
  if (access != DirectAccess::kAll) return plan_direct(costs, group_costs, extra);
  DirectPlan all;
  for (size_t i = 0; i < costs.size(); ++i) {
    all.direct.push_back(costs[i].bytes > 0 && std::isfinite(extra[i]));
  }
  all.grouping = group_optimally_direct(costs, group_costs, extra, all.direct);
  return all;
}

DeviceRun run_on_device(ServedModel& model, std::vector<Tensor> inputs,
                        const SwitchStreams& streams, const DirectPlan* plan,
                        const SwitchOptions& switch_options,
                        const std::function<bool()>& should_stop) {
  FERRY_CHECK(!should_stop || plan == nullptr,
              "run_on_device: expected a run of resident weights to be preemptible, got a switch");
  autograd::NoGradGuard no_grad;
  const Device device = streams.compute.device();
  DeviceGuard device_guard(device);
  StreamGuard on_compute(streams.compute);
  DeviceRun run;
  const auto t1 = RunClock::now();
  try {
    for (Tensor& t : inputs) {
      if (t.defined()) t = t.to(device);
    }
    RunClock::time_point t2, t3;
    if (plan != nullptr) {
      const Tensor first = model.begin_run(inputs);
      streams.compute.synchronize();
      t2 = RunClock::now();
      SwitchOptions options = switch_options;
      if (std::find(plan->direct.begin(), plan->direct.end(), true) != plan->direct.end()) {
        auto direct = std::make_shared<DirectLayers>();
        direct->mapped = map_image(model.image(), device);
        direct->direct = plan->direct;
        options.direct = std::move(direct);
      }
      QueuedSwitch queued =
          switch_in(model.image(), model.layers(), plan->grouping.ends, first, streams, options);
      run.block = queued.block;
      if (!queued.arrivals.empty()) queued.arrivals.back().synchronize();
      t3 = RunClock::now();
      run.outputs = model.end_run(queued.output);
      streams.compute.synchronize();
      streams.copy.synchronize();
    } else {
      streams.compute.synchronize();
      t2 = RunClock::now();
      t3 = t2;
      run.outputs =
          !should_stop ? model.run(inputs) : run_stoppable(model, inputs, streams, should_stop);
      streams.compute.synchronize();
    }
    const auto t4 = RunClock::now();
    for (NamedTensor& o : run.outputs) o.tensor = o.tensor.cpu().contiguous();
    const auto t5 = RunClock::now();
    run.timings.transfer_ms = ms_between(t1, t2) + ms_between(t2, t3) + ms_between(t4, t5);
    run.timings.compute_ms = ms_between(t3, t4);
    run.switch_ms = plan != nullptr ? ms_between(t2, t4) : 0;
  } catch (...) {
    try {
      streams.compute.synchronize();
      streams.copy.synchronize();
      model.end_run(Tensor());
    } catch (const Error&) {
      // The request's own error is the one to report.
    }
    if (plan != nullptr) switch_out(model.image());
    throw;
  }
  return run;
}

}  // namespace ferry::switch_
