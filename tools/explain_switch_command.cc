// `ferry explain-switch MODEL`: how a switch to MODEL on a device would be pipelined. Measures
// the link and each layer on the device (under the sim's link and compute models when the device
// is a sim device: FERRY_SIM_BANDWIDTH, FERRY_SIM_COMPUTE), then prints the completion time each
// planner predicts (load then run, one group per layer, PipeSwitch's search with a host
// synchronize per group, ferry's exact grouping with device-side waits, and ferry with direct host
// access) and ferry's groups, then which layers read their weights in place from pinned host
// memory (direct_plan.h) and the groups around them; when the device has a peer (another device
// of its type, or --peer), also the parallel-transmission plan through the peer (its host link,
// then the peer link: FERRY_SIM_BANDWIDTH's "peer=").
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "ferry/autograd/grad_mode.h"
#include "ferry/core/error.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"
#include "ferry/switch/direct_layers.h"
#include "ferry/switch/direct_plan.h"
#include "ferry/switch/grouping.h"
#include "ferry/switch/model_image.h"
#include "ferry/switch/parallel_grouping.h"
#include "ferry/switch/switch_profile.h"
#include "ferry/switch/zoo_model.h"
#include "tools/command.h"

namespace ferry::tools {
namespace {

struct ExplainSwitchOptions {
  std::string model;
  std::string device = "sim:0";
  std::string peer;  // "": the first other device of the same type, if any; "none": no peer
  switch_::ZooInputShape shape;
  int repeats = 3;
  bool layers = false;
};

double ms(double seconds) { return seconds * 1e3; }

std::optional<Device> peer_of(Device device, const std::string& option) {
  if (option == "none") return std::nullopt;
  if (!option.empty()) {
    const Device peer(option);
    FERRY_CHECK(peer.type() == device.type() && peer != device,
                "explain-switch: expected --peer to be another device of ", device, "'s type, got ",
                peer);
    return peer;
  }
  const int count = device_count(device.type());
  for (int i = 0; i < count; ++i) {
    if (i != device.index()) return Device(device.type(), static_cast<DeviceIndex>(i));
  }
  return std::nullopt;
}

void print_plan(const char* label, const switch_::Grouping& plan, double ready_s) {
  std::printf("  %-30s %6zu %12.3f %12.3f%s\n", label, plan.ends.size(), ms(plan.completion_s),
              ms(plan.completion_s - ready_s), plan.exhaustive ? "" : "  (search stopped early)");
}

struct DirectOutcome {
  switch_::DirectPlan plan;
  std::vector<double> extra_s;  // per layer: what reading its weights in place adds
};

// Direct host access: the weights moved into a pinned image mapped into `device`, each weighted
// layer profiled reading them in place, and the planner's choice of direct layers and groups.
DirectOutcome plan_direct_access(switch_::ZooModel& model, Device device, const Tensor& input,
                                 const switch_::LinkProfile& link,
                                 const std::vector<switch_::LayerCost>& costs, int repeats) {
  const switch_::ModelImage image(model.layers);
  const Tensor mapped = switch_::map_image(image, device);
  DirectOutcome out;
  out.extra_s =
      switch_::profile_direct_extra(image, mapped, model.layers, input, link, costs, repeats);
  out.plan = switch_::plan_direct(costs, switch_::ferry_group_costs(link), out.extra_s);
  image.bind_host();
  return out;
}

void print_direct(const std::vector<switch_::LayerCost>& costs, const DirectOutcome& direct) {
  std::printf("\n  direct host access (%s over %zu eligible layers):\n",
              direct.plan.exact ? "exact" : "bounded search", direct.plan.candidates);
  std::printf("  %-24s %12s %12s %16s\n", "layer", "MB", "transfer ms", "in-place +ms");
  bool any = false;
  for (size_t i = 0; i < costs.size(); ++i) {
    if (!direct.plan.direct[i]) continue;
    any = true;
    std::printf("  %-24s %12.3f %12.4f %16.4f\n", costs[i].name.c_str(),
                static_cast<double>(costs[i].bytes) / 1e6, ms(costs[i].transfer_s),
                ms(direct.extra_s[i]));
  }
  if (!any) std::printf("  none: plain pipelining wins for every layer\n");
  std::printf("\n  ferry + direct's groups (direct layers are not copied):\n");
  const auto groups = switch_::describe_groups(costs, direct.plan.grouping.ends);
  for (size_t g = 0; g < groups.size(); ++g) std::printf("  %4zu  %s\n", g + 1, groups[g].c_str());
}

int explain_switch(const ExplainSwitchOptions& o) {
  const Device device(o.device);
  switch_::ZooModel model = switch_::make_zoo_model(o.model, 0, o.shape);
  model.module->to(device);
  const Tensor input = model.example_input(device);
  const switch_::LinkProfile link = switch_::measure_link(device, std::max(15, 5 * o.repeats));
  const std::vector<switch_::LayerCost> costs =
      switch_::profile_layers(model.layers, input, link, o.repeats);

  const switch_::GroupCosts ferry_costs = switch_::ferry_group_costs(link);
  const switch_::GroupCosts pipeswitch_costs = switch_::pipeswitch_group_costs(link);
  const double ready_s = switch_::ready_time(costs);
  double transfer_s = 0;
  uint64_t bytes = 0;
  for (const auto& layer : costs) {
    transfer_s += layer.transfer_s;
    bytes += layer.bytes;
  }

  std::printf("explain-switch %s on %s (batch %lld)\n", o.model.c_str(), device.str().c_str(),
              static_cast<long long>(o.shape.batch));
  std::printf(
      "  link: %.2f GB/s, %.1f us per copy; a group's arrival seen in %.1f us on the device, "
      "%.1f us through a host synchronize and a message\n",
      link.bandwidth_bytes_per_s / 1e9, link.copy_latency_s * 1e6, link.device_wait_s * 1e6,
      link.host_sync_s * 1e6);
  std::printf("  %zu layers, %.2f MB of weights: transfer %.3f ms, compute (ready) %.3f ms\n",
              costs.size(), static_cast<double>(bytes) / 1e6, ms(transfer_s), ms(ready_s));
  if (o.layers) {
    std::printf("\n  %-24s %12s %12s %12s\n", "layer", "MB", "transfer ms", "compute ms");
    for (const auto& layer : costs) {
      std::printf("  %-24s %12.3f %12.4f %12.4f\n", layer.name.c_str(),
                  static_cast<double>(layer.bytes) / 1e6, ms(layer.transfer_s),
                  ms(layer.compute_s));
    }
  }
  std::printf("\n  %-30s %6s %12s %12s\n", "plan", "groups", "total ms", "over ready");
  print_plan("load, then run", switch_::group_all_at_once(costs, ferry_costs), ready_s);
  print_plan("per layer, host sync", switch_::group_per_layer(costs, pipeswitch_costs), ready_s);
  print_plan("PipeSwitch search, host sync",
             switch_::group_like_pipeswitch(costs, pipeswitch_costs), ready_s);
  const switch_::Grouping optimal = switch_::group_optimally(costs, ferry_costs);
  print_plan("ferry: optimal, device wait", optimal, ready_s);
  const DirectOutcome direct = plan_direct_access(model, device, input, link, costs, o.repeats);
  print_plan("ferry + direct host access", direct.plan.grouping, ready_s);
  std::printf("\n  ferry's groups:\n");
  const auto groups = switch_::describe_groups(costs, optimal.ends);
  for (size_t g = 0; g < groups.size(); ++g) std::printf("  %4zu  %s\n", g + 1, groups[g].c_str());
  print_direct(costs, direct);

  const std::optional<Device> peer = peer_of(device, o.peer);
  if (!peer) return 0;
  const switch_::PeerRoute route = switch_::measure_peer_route(*peer, device, link, 15);
  std::printf(
      "\n  parallel transmission through %s: its host link %.2fx the target's time per byte, "
      "%.1f us per copy; peer link %.2fx, %.1f us per copy\n",
      peer->str().c_str(), route.host_scale, route.host_overhead_s * 1e6, route.link_scale,
      route.link_overhead_s * 1e6);
  const switch_::ParallelPlan parallel = switch_::group_parallel(costs, ferry_costs, route);
  if (parallel.peer_groups() == 0) {
    std::printf("  the peer route does not win here: every group on %s's own link\n",
                device.str().c_str());
    return 0;
  }
  std::printf("  %-30s %6zu %12.3f %12.3f  (within %.3f ms of the optimum)\n",
              "ferry: parallel, device wait", parallel.ends.size(), ms(parallel.completion_s),
              ms(parallel.completion_s - ready_s), ms(parallel.bound_s));
  const auto parallel_groups = switch_::describe_groups(costs, parallel.ends);
  for (size_t g = 0; g < parallel_groups.size(); ++g) {
    std::printf("  %4zu  %-4s  %s\n", g + 1, switch_::route_name(parallel.routes[g]),
                parallel_groups[g].c_str());
  }
  return 0;
}

FERRY_REGISTER_COMMAND(
    "explain-switch",
    "Plan a switch to MODEL on a device: measure the link and each layer, and print the "
    "completion time of each grouping (load then run, per layer, PipeSwitch's, ferry's optimal) "
    "and ferry's groups",
    [](CLI::App& sub) -> std::function<int()> {
      auto options = std::make_shared<ExplainSwitchOptions>();
      sub.add_option("model", options->model,
                     "Architecture: resnet18/34/50/101/152, bert-base or bert-tiny")
          ->required();
      sub.add_option("--device", options->device, "The device switched to")->capture_default_str();
      sub.add_option("--peer", options->peer,
                     "The peer for parallel transmission (default: the first other device of "
                     "the same type; \"none\": no parallel plan)");
      sub.add_option("--batch", options->shape.batch, "Batch of the request")
          ->capture_default_str();
      sub.add_option("--image-size", options->shape.image_size, "ResNet input height and width")
          ->capture_default_str();
      sub.add_option("--seq-len", options->shape.seq_len, "BERT sequence length")
          ->capture_default_str();
      sub.add_option("--repeats", options->repeats, "Timed runs per measurement (median)")
          ->capture_default_str();
      sub.add_flag("--layers", options->layers, "Also print each layer's size and times");
      return [options] { return explain_switch(*options); };
    });

}  // namespace
}  // namespace ferry::tools
