// The switch timeline model and its planners (see grouping.h).
#include "ferry/switch/grouping.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>

#include "ferry/core/error.h"

namespace ferry::switch_ {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

void check_time(double value, const char* what, const std::string& layer) {
  FERRY_CHECK(
      std::isfinite(value) && value >= 0, "switch grouping: expected a finite, non-negative ", what,
      layer.empty() ? "" : " for layer '", layer, layer.empty() ? "" : "'", ", got ", value);
}

// Prefix sums of the transfer and compute times: sum over [a, b) is at(b) - at(a).
struct PrefixTimes {
  std::vector<double> transfer{0.0};
  std::vector<double> compute{0.0};

  explicit PrefixTimes(std::span<const LayerCost> layers) {
    for (const LayerCost& layer : layers) {
      transfer.push_back(transfer.back() + layer.transfer_s);
      compute.push_back(compute.back() + layer.compute_s);
    }
  }
  double transfer_between(size_t a, size_t b) const { return transfer[b] - transfer[a]; }
  double compute_between(size_t a, size_t b) const { return compute[b] - compute[a]; }
};

Grouping finish(std::span<const LayerCost> layers, const GroupCosts& costs,
                std::vector<size_t> ends, std::string planner, bool exhaustive = true) {
  Grouping grouping;
  grouping.completion_s = simulate_switch(layers, costs, ends).completion_s;
  grouping.ends = std::move(ends);
  grouping.planner = std::move(planner);
  grouping.exhaustive = exhaustive;
  return grouping;
}

// PipeSwitch's branch-and-bound search over the first group of what is left.
class PipeSwitchSearch {
 public:
  PipeSwitchSearch(std::span<const LayerCost> layers, const GroupCosts& costs, uint64_t budget)
      : layers_(layers), costs_(costs), prefix_(layers), budget_(budget) {}

  void seed(const Grouping& grouping) {
    if (grouping.completion_s < best_completion_) {
      best_completion_ = grouping.completion_s;
      best_ends_ = grouping.ends;
    }
  }

  void run() { visit(0, 0.0, 0.0); }

  const std::vector<size_t>& best_ends() const { return best_ends_; }
  bool exhaustive() const { return !stopped_; }

 private:
  void visit(size_t first, double copy_end, double compute_end) {
    const size_t n = layers_.size();
    if (first == n) {
      if (compute_end < best_completion_) {
        best_completion_ = compute_end;
        best_ends_ = ends_;
      }
      return;
    }
    for (size_t end = first + 1; end <= n && !stopped_; ++end) {
      if (++branches_ > budget_) {
        stopped_ = true;
        return;
      }
      const double arrival =
          copy_end + costs_.copy_overhead_s + prefix_.transfer_between(first, end);
      const double ready = arrival + costs_.wait_s;
      // The merge rule: a group that would arrive before the compute stream is free grows.
      if (ready < compute_end && end < n) continue;
      const double group_done = std::max(compute_end, ready) + prefix_.compute_between(first, end);
      double bound = group_done + prefix_.compute_between(end, n);
      if (end < n) {
        bound =
            std::max(bound, arrival + costs_.copy_overhead_s + prefix_.transfer_between(end, n) +
                                costs_.wait_s + layers_[n - 1].compute_s);
      }
      if (bound >= best_completion_) continue;
      ends_.push_back(end);
      visit(end, arrival, group_done);
      ends_.pop_back();
    }
  }

  std::span<const LayerCost> layers_;
  GroupCosts costs_;
  PrefixTimes prefix_;
  uint64_t budget_;
  uint64_t branches_ = 0;
  bool stopped_ = false;
  double best_completion_ = kInfinity;
  std::vector<size_t> best_ends_;
  std::vector<size_t> ends_;
};

}  // namespace

void check_costs(std::span<const LayerCost> layers, const GroupCosts& costs) {
  check_time(costs.copy_overhead_s, "per-group copy overhead", "");
  check_time(costs.wait_s, "per-group wait", "");
  for (const LayerCost& layer : layers) {
    check_time(layer.transfer_s, "transfer time", layer.name);
    check_time(layer.compute_s, "compute time", layer.name);
  }
}

void check_grouping(std::span<const size_t> ends, size_t layer_count) {
  size_t previous = 0;
  for (size_t i = 0; i < ends.size(); ++i) {
    FERRY_CHECK(ends[i] > previous && ends[i] <= layer_count,
                "switch grouping: expected group ends to increase strictly within (0, ",
                layer_count, "], got ", ends[i], " at group ", i, " after ", previous);
    previous = ends[i];
  }
  FERRY_CHECK(previous == layer_count, "switch grouping: expected the last group to end at layer ",
              layer_count, ", got ", previous);
}

SwitchTimeline simulate_switch(std::span<const LayerCost> layers, const GroupCosts& costs,
                               std::span<const size_t> ends) {
  check_costs(layers, costs);
  check_grouping(ends, layers.size());
  SwitchTimeline timeline;
  double copy_end = 0;
  double compute_end = 0;
  size_t first = 0;
  for (size_t group = 0; group < ends.size(); ++group) {
    SwitchSpan copy{group, first, copy_end, copy_end + costs.copy_overhead_s};
    for (size_t i = first; i < ends[group]; ++i) copy.end_s += layers[i].transfer_s;
    copy_end = copy.end_s;
    timeline.copies.push_back(copy);
    const double ready = copy_end + costs.wait_s;
    for (size_t i = first; i < ends[group]; ++i) {
      SwitchSpan compute{group, i, std::max(compute_end, ready), 0};
      compute.end_s = compute.start_s + layers[i].compute_s;
      compute_end = compute.end_s;
      timeline.computes.push_back(compute);
    }
    first = ends[group];
  }
  timeline.completion_s = compute_end;
  return timeline;
}

double ready_time(std::span<const LayerCost> layers) {
  double total = 0;
  for (const LayerCost& layer : layers) total += layer.compute_s;
  return total;
}

Grouping group_optimally(std::span<const LayerCost> layers, const GroupCosts& costs) {
  check_costs(layers, costs);
  const size_t n = layers.size();
  if (n == 0) return finish(layers, costs, {}, "optimal");
  const PrefixTimes prefix(layers);
  // earliest[j * (n + 1) + k]: the earliest the compute stream can finish layer j - 1 when the
  // first j layers form k groups. With j and k fixed, the copy stream's position is fixed too
  // (transfer of the j layers plus k overheads), and a later compute end is never better for
  // what follows, so keeping the least one per (j, k) loses no optimum.
  const size_t stride = n + 1;
  std::vector<double> earliest(stride * stride, kInfinity);
  std::vector<size_t> previous_end(stride * stride, 0);
  earliest[0] = 0;
  for (size_t first = 0; first < n; ++first) {
    for (size_t groups = (first == 0 ? 0 : 1); groups <= first; ++groups) {
      const double compute_end = earliest[first * stride + groups];
      if (compute_end == kInfinity) continue;
      for (size_t end = first + 1; end <= n; ++end) {
        const double arrival =
            prefix.transfer[end] + static_cast<double>(groups + 1) * costs.copy_overhead_s;
        const double done =
            std::max(compute_end, arrival + costs.wait_s) + prefix.compute_between(first, end);
        double& slot = earliest[end * stride + groups + 1];
        if (done < slot) {
          slot = done;
          previous_end[end * stride + groups + 1] = first;
        }
      }
    }
  }
  size_t best_groups = 1;
  for (size_t groups = 2; groups <= n; ++groups) {
    if (earliest[n * stride + groups] < earliest[n * stride + best_groups]) best_groups = groups;
  }
  std::vector<size_t> ends;
  for (size_t end = n, groups = best_groups; groups > 0; --groups) {
    ends.push_back(end);
    end = previous_end[end * stride + groups];
  }
  std::reverse(ends.begin(), ends.end());
  return finish(layers, costs, std::move(ends), "optimal");
}

Grouping group_like_pipeswitch(std::span<const LayerCost> layers, const GroupCosts& costs,
                               uint64_t max_branches) {
  check_costs(layers, costs);
  if (layers.empty()) return finish(layers, costs, {}, "pipeswitch");
  PipeSwitchSearch search(layers, costs, max_branches);
  search.seed(group_all_at_once(layers, costs));
  search.seed(group_per_layer(layers, costs));
  search.run();
  return finish(layers, costs, search.best_ends(), "pipeswitch", search.exhaustive());
}

Grouping group_per_layer(std::span<const LayerCost> layers, const GroupCosts& costs) {
  std::vector<size_t> ends(layers.size());
  for (size_t i = 0; i < ends.size(); ++i) ends[i] = i + 1;
  return finish(layers, costs, std::move(ends), "per-layer");
}

Grouping group_all_at_once(std::span<const LayerCost> layers, const GroupCosts& costs) {
  std::vector<size_t> ends;
  if (!layers.empty()) ends.push_back(layers.size());
  return finish(layers, costs, std::move(ends), "all-at-once");
}

std::vector<std::string> describe_groups(std::span<const LayerCost> layers,
                                         std::span<const size_t> ends) {
  check_grouping(ends, layers.size());
  std::vector<std::string> out;
  size_t first = 0;
  for (size_t end : ends) {
    uint64_t bytes = 0;
    for (size_t i = first; i < end; ++i) bytes += layers[i].bytes;
    std::ostringstream text;
    text << layers[first].name;
    if (end - first > 1) text << " .. " << layers[end - 1].name;
    text << " (" << (end - first) << (end - first == 1 ? " layer, " : " layers, ") << std::fixed
         << std::setprecision(2) << static_cast<double>(bytes) / 1e6 << " MB)";
    out.push_back(text.str());
    first = end;
  }
  return out;
}

}  // namespace ferry::switch_
