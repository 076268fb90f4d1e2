// The direct-host-access cost model and planner (see direct_plan.h).
#include "ferry/switch/direct_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ferry/core/error.h"

namespace ferry::switch_ {
namespace {

constexpr double kNoPlanYet = std::numeric_limits<double>::infinity();

bool direct_eligible(const LayerCost& layer, double extra) {
  return std::isfinite(extra) && layer.bytes > 0;
}

bool flagged_direct(const std::vector<bool>& direct, size_t i) {
  return !direct.empty() && direct[i];
}

double direct_compute_of(std::span<const LayerCost> layers, std::span<const double> extra,
                         const std::vector<bool>& direct, size_t i) {
  return layers[i].compute_s + (flagged_direct(direct, i) ? extra[i] : 0.0);
}

}  // namespace

void check_direct(std::span<const LayerCost> layers, std::span<const double> extra,
                  const std::vector<bool>& direct) {
  FERRY_CHECK(extra.size() == layers.size(), "direct plan: expected one direct cost per layer (",
              layers.size(), "), got ", extra.size());
  FERRY_CHECK(direct.empty() || direct.size() == layers.size(),
              "direct plan: expected one direct flag per layer (", layers.size(), ") or none, got ",
              direct.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    FERRY_CHECK(!std::isnan(extra[i]) && extra[i] >= 0,
                "direct plan: expected a non-negative direct cost (infinity: not eligible) for "
                "layer '",
                layers[i].name, "', got ", extra[i]);
    FERRY_CHECK(direct.empty() || !direct[i] || direct_eligible(layers[i], extra[i]),
                "direct plan: expected direct layers to be eligible (weights and a finite direct "
                "cost), but layer '",
                layers[i].name, "' has ", layers[i].bytes, " bytes and cost ", extra[i]);
  }
}

SwitchTimeline simulate_direct_switch(std::span<const LayerCost> layers, const GroupCosts& costs,
                                      std::span<const double> direct_extra_s,
                                      const std::vector<bool>& direct,
                                      std::span<const size_t> ends) {
  check_costs(layers, costs);
  check_grouping(ends, layers.size());
  check_direct(layers, direct_extra_s, direct);
  SwitchTimeline timeline;
  double copy_end = 0;
  double compute_end = 0;
  size_t first = 0;
  for (size_t group = 0; group < ends.size(); ++group) {
    bool copied = false;
    for (size_t i = first; i < ends[group];) {
      if (flagged_direct(direct, i)) {
        ++i;
        continue;
      }
      SwitchSpan copy{group, i, copy_end, copy_end + costs.copy_overhead_s};
      for (; i < ends[group] && !flagged_direct(direct, i); ++i) copy.end_s += layers[i].transfer_s;
      copy_end = copy.end_s;
      timeline.copies.push_back(copy);
      copied = true;
    }
    const double ready = copied ? copy_end + costs.wait_s : 0.0;
    for (size_t i = first; i < ends[group]; ++i) {
      SwitchSpan compute{group, i, std::max(compute_end, ready), 0};
      compute.end_s = compute.start_s + direct_compute_of(layers, direct_extra_s, direct, i);
      compute_end = compute.end_s;
      timeline.computes.push_back(compute);
    }
    first = ends[group];
  }
  timeline.completion_s = compute_end;
  return timeline;
}

Grouping group_optimally_direct(std::span<const LayerCost> layers, const GroupCosts& costs,
                                std::span<const double> direct_extra_s,
                                const std::vector<bool>& direct) {
  check_costs(layers, costs);
  const size_t n = layers.size();
  Grouping result;
  result.planner = "optimal+direct";
  if (n == 0) return result;
  // Prefix sums of the copied layers' transfer and of the compute (direct costs included).
  std::vector<double> transfer(n + 1, 0.0), compute(n + 1, 0.0);
  for (size_t i = 0; i < n; ++i) {
    transfer[i + 1] = transfer[i] + (flagged_direct(direct, i) ? 0.0 : layers[i].transfer_s);
    compute[i + 1] = compute[i] + direct_compute_of(layers, direct_extra_s, direct, i);
  }
  // earliest[j * stride + c]: the least compute end after layers [0, j) in whole groups with c
  // copies made; the copy stream then stands at transfer[j] + c * overhead, so a later compute
  // end is never better for what follows (as in group_optimally).
  const size_t stride = n + 1;
  std::vector<double> earliest(stride * stride, kNoPlanYet);
  std::vector<size_t> previous_end(stride * stride, 0), previous_copies(stride * stride, 0);
  earliest[0] = 0;
  for (size_t first = 0; first < n; ++first) {
    for (size_t made = 0; made <= first; ++made) {
      const double compute_end = earliest[first * stride + made];
      if (compute_end == kNoPlanYet) continue;
      size_t runs = 0;
      for (size_t end = first + 1; end <= n; ++end) {
        const size_t i = end - 1;
        if (!flagged_direct(direct, i) && (i == first || flagged_direct(direct, i - 1))) ++runs;
        const size_t copies = made + runs;
        double start = compute_end;
        if (runs > 0) {
          const double arrival =
              transfer[end] + static_cast<double>(copies) * costs.copy_overhead_s;
          // The copies of [first, end) end where the last copied layer's bytes end.
          start = std::max(start, arrival + costs.wait_s);
        }
        const double done = start + (compute[end] - compute[first]);
        double& slot = earliest[end * stride + copies];
        if (done < slot) {
          slot = done;
          previous_end[end * stride + copies] = first;
          previous_copies[end * stride + copies] = made;
        }
      }
    }
  }
  size_t best = 0;
  for (size_t c = 1; c <= n; ++c) {
    if (earliest[n * stride + c] < earliest[n * stride + best]) best = c;
  }
  std::vector<size_t> ends;
  for (size_t end = n, copies = best; end > 0;) {
    ends.push_back(end);
    const size_t slot = end * stride + copies;
    end = previous_end[slot];
    copies = previous_copies[slot];
  }
  std::reverse(ends.begin(), ends.end());
  result.completion_s =
      simulate_direct_switch(layers, costs, direct_extra_s, direct, ends).completion_s;
  result.ends = std::move(ends);
  return result;
}

DirectPlan plan_direct(std::span<const LayerCost> layers, const GroupCosts& costs,
                       std::span<const double> direct_extra_s, size_t max_candidates) {
  check_costs(layers, costs);
  check_direct(layers, direct_extra_s, {});
  std::vector<size_t> candidates;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (direct_eligible(layers[i], direct_extra_s[i])) candidates.push_back(i);
  }
  DirectPlan plan;
  plan.exact = candidates.size() <= max_candidates;
  if (!plan.exact) {
    std::stable_sort(candidates.begin(), candidates.end(), [&](size_t a, size_t b) {
      return layers[a].transfer_s - direct_extra_s[a] > layers[b].transfer_s - direct_extra_s[b];
    });
    candidates.resize(max_candidates);
  }
  plan.candidates = candidates.size();
  plan.direct.assign(layers.size(), false);
  plan.grouping = group_optimally_direct(layers, costs, direct_extra_s, plan.direct);
  std::vector<bool> direct(layers.size(), false);
  for (uint64_t mask = 1; mask < (uint64_t{1} << candidates.size()); ++mask) {
    for (size_t k = 0; k < candidates.size(); ++k) direct[candidates[k]] = ((mask >> k) & 1) != 0;
    Grouping grouping = group_optimally_direct(layers, costs, direct_extra_s, direct);
    if (grouping.completion_s < plan.grouping.completion_s) {
      plan.grouping = std::move(grouping);
      plan.direct = direct;
    }
  }
  plan.grouping.exhaustive = plan.exact;
  return plan;
}

}  // namespace ferry::switch_
