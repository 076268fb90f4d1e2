// The parallel-transmission timeline and its planner (see parallel_grouping.h).
//
// Note [Bucketed planner]: after the first j layers are planned, what the rest can do depends
// only on four times: where the host copy stream, the peer's host stream and the peer link stream
// are (a, b1, b2), and when the compute stream finishes layer j - 1 (c). Every later time is a
// max or a sum of these (each with slope 1) and non-negative costs, so raising any of them by at
// most d raises the completion by at most d. The planner keeps, per j and per bucket of
// (a, b1, b2) on a grid of `resolution` seconds, the one state with the least c; a dropped state
// is then within one resolution in a, b1 and b2, and no better in c, than the kept one. Along an
// optimal plan's G group boundaries this loses at most G resolutions, so the plan found is within
// G * resolution of the optimum (ParallelPlan::bound_s states n * resolution). States whose lower
// bound (all the compute left; the copies left split as evenly as possible over the two host
// links, plus the wait) cannot beat the best plan known are dropped too, which loses nothing.
// Passes run from a coarse grid to the fine one, each seeding the next's best plan known.
#include "ferry/switch/parallel_grouping.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <unordered_map>

#include "ferry/core/error.h"

namespace ferry::switch_ {
namespace {

void check_value(double value, bool positive, const char* what) {
  FERRY_CHECK(std::isfinite(value) && (positive ? value > 0 : value >= 0),
              "parallel switch grouping: expected a finite, ",
              positive ? "positive " : "non-negative ", what, ", got ", value);
}

struct State {
  double a = 0;                  // host copy stream's end
  double b1 = 0;                 // peer's host stream's end
  double b2 = 0;                 // peer link stream's end
  double c = 0;                  // compute stream's end
  uint32_t parent = UINT32_MAX;  // the kept state this one extends
  uint32_t first = 0;            // its last group's first layer
  Route route = Route::kHost;    // its last group's route
};

struct BucketKey {
  int64_t a, b1, b2;
  bool operator==(const BucketKey&) const = default;
};
struct BucketHash {
  size_t operator()(const BucketKey& k) const noexcept {
    uint64_t h = static_cast<uint64_t>(k.a) * 0x9E3779B97F4A7C15ull;
    h ^= static_cast<uint64_t>(k.b1) + 0x7F4A7C159E3779B9ull + (h << 6) + (h >> 2);
    h ^= static_cast<uint64_t>(k.b2) + 0x94D049BB133111EBull + (h << 6) + (h >> 2);
    return static_cast<size_t>(h);
  }
};

class BucketPlanner {
 public:
  BucketPlanner(std::span<const LayerCost> layers, const GroupCosts& costs, const PeerRoute& peer,
                double resolution, double incumbent)
      : layers_(layers), costs_(costs), peer_(peer), resolution_(resolution), best_(incumbent) {
    transfer_.push_back(0);
    compute_.push_back(0);
    for (const LayerCost& layer : layers) {
      transfer_.push_back(transfer_.back() + layer.transfer_s);
      compute_.push_back(compute_.back() + layer.compute_s);
    }
  }

  // Fills ends and routes when a plan better than the incumbent exists; returns whether.
  bool run(std::vector<size_t>& ends, std::vector<Route>& routes) {
    const size_t n = layers_.size();
    pending_.assign(n + 1, {});
    kept_.clear();
    kept_.push_back(State{});
    for (size_t end = 1; end <= n; ++end) {
      extend(0, 0, end, Route::kHost);
      extend(0, 0, end, Route::kPeer);
    }
    for (size_t j = 1; j < n; ++j) {
      std::vector<State> states;
      states.reserve(pending_[j].size());
      for (const auto& entry : pending_[j]) states.push_back(entry.second);
      pending_[j] = {};
      for (const State& s : states) {
        if (lower_bound(s, j) >= best_) continue;
        const auto index = static_cast<uint32_t>(kept_.size());
        kept_.push_back(s);
        for (size_t end = j + 1; end <= n; ++end) {
          extend(index, j, end, Route::kHost);
          extend(index, j, end, Route::kPeer);
        }
      }
    }
    if (!found_) return false;
    std::vector<std::pair<size_t, Route>> groups{{n, final_.route}};
    size_t end = final_.first;
    for (uint32_t at = final_.parent; at != 0; at = kept_[at].parent) {
      groups.emplace_back(end, kept_[at].route);
      end = kept_[at].first;
    }
    std::reverse(groups.begin(), groups.end());
    for (const auto& [group_end, route] : groups) {
      ends.push_back(group_end);
      routes.push_back(route);
    }
    return true;
  }

  double best() const { return best_; }

 private:
  void extend(uint32_t parent, size_t first, size_t end, Route route) {
    const State& s = kept_[parent];
    const double transfer = transfer_[end] - transfer_[first];
    State next = s;
    double arrival = 0;
    if (route == Route::kHost) {
      next.a = s.a + costs_.copy_overhead_s + transfer;
      arrival = next.a;
    } else {
      next.b1 = s.b1 + peer_.host_overhead_s + peer_.host_scale * transfer;
      next.b2 = std::max(next.b1, s.b2) + peer_.link_overhead_s + peer_.link_scale * transfer;
      arrival = next.b2;
    }
    next.c = std::max(s.c, arrival + costs_.wait_s) + compute_[end] - compute_[first];
    next.parent = parent;
    next.first = static_cast<uint32_t>(first);
    next.route = route;
    if (end == layers_.size()) {
      if (next.c < best_) {
        best_ = next.c;
        final_ = next;
        found_ = true;
      }
      return;
    }
    if (lower_bound(next, end) >= best_) return;
    const BucketKey key{bucket(next.a), bucket(next.b1), bucket(next.b2)};
    auto [it, inserted] = pending_[end].try_emplace(key, next);
    if (!inserted && next.c < it->second.c) it->second = next;
  }

  int64_t bucket(double t) const {
    return resolution_ > 0 ? static_cast<int64_t>(std::floor(t / resolution_))
                           : static_cast<int64_t>(std::bit_cast<uint64_t>(t));
  }

  // Completion is at least the compute left after c, and at least the later of the two host
  // links' ends plus the wait, where the copies left split at best evenly over the two links.
  double lower_bound(const State& s, size_t j) const {
    const size_t n = layers_.size();
    const double rest = transfer_[n] - transfer_[j];
    const double h = peer_.host_scale;
    const double host_share = std::clamp((s.b1 + h * rest - s.a) / (1 + h), 0.0, rest);
    const double copies_end = std::max(s.a + host_share, s.b1 + h * (rest - host_share));
    return std::max(s.c + compute_[n] - compute_[j], copies_end + costs_.wait_s);
  }

  std::span<const LayerCost> layers_;
  GroupCosts costs_;
  PeerRoute peer_;
  double resolution_;
  std::vector<double> transfer_;
  std::vector<double> compute_;
  std::vector<std::unordered_map<BucketKey, State, BucketHash>> pending_;
  std::vector<State> kept_;  // kept_[0] is the empty plan
  double best_;
  State final_;
  bool found_ = false;
};

}  // namespace

const char* route_name(Route route) { return route == Route::kHost ? "host" : "peer"; }

size_t ParallelPlan::peer_groups() const {
  return static_cast<size_t>(std::count(routes.begin(), routes.end(), Route::kPeer));
}

void check_peer_route(const PeerRoute& peer) {
  check_value(peer.host_overhead_s, false, "peer host-link overhead per group");
  check_value(peer.link_overhead_s, false, "peer-link overhead per group");
  check_value(peer.host_scale, true, "peer host-link scale");
  check_value(peer.link_scale, true, "peer-link scale");
}

ParallelTimeline simulate_parallel_switch(std::span<const LayerCost> layers,
                                          const GroupCosts& costs, const PeerRoute& peer,
                                          std::span<const size_t> ends,
                                          std::span<const Route> routes) {
  check_costs(layers, costs);
  check_peer_route(peer);
  check_grouping(ends, layers.size());
  FERRY_CHECK(routes.size() == ends.size(), "parallel switch: expected one route per group (",
              ends.size(), "), got ", routes.size());
  ParallelTimeline t;
  double a = 0, b1 = 0, b2 = 0, c = 0;
  size_t first = 0;
  for (size_t g = 0; g < ends.size(); ++g) {
    double transfer = 0;
    for (size_t i = first; i < ends[g]; ++i) transfer += layers[i].transfer_s;
    double arrival = 0;
    if (routes[g] == Route::kHost) {
      t.copies.push_back({g, first, a, a + costs.copy_overhead_s + transfer});
      a = arrival = t.copies.back().end_s;
    } else {
      t.peer_copies.push_back(
          {g, first, b1, b1 + peer.host_overhead_s + peer.host_scale * transfer});
      b1 = t.peer_copies.back().end_s;
      const double start = std::max(b1, b2);
      t.peer_forwards.push_back(
          {g, first, start, start + peer.link_overhead_s + peer.link_scale * transfer});
      b2 = arrival = t.peer_forwards.back().end_s;
    }
    for (size_t i = first; i < ends[g]; ++i) {
      SwitchSpan compute{g, i, std::max(c, arrival + costs.wait_s), 0};
      compute.end_s = compute.start_s + layers[i].compute_s;
      c = compute.end_s;
      t.computes.push_back(compute);
    }
    first = ends[g];
  }
  t.completion_s = c;
  return t;
}

ParallelPlan group_parallel(std::span<const LayerCost> layers, const GroupCosts& costs,
                            const std::optional<PeerRoute>& peer, double resolution_s) {
  const Grouping single = group_optimally(layers, costs);
  ParallelPlan plan;
  plan.ends = single.ends;
  plan.routes.assign(single.ends.size(), Route::kHost);
  plan.completion_s = single.completion_s;
  plan.planner = single.planner;
  if (!peer) return plan;
  check_peer_route(*peer);
  FERRY_CHECK(std::isfinite(resolution_s), "group_parallel: expected a finite resolution, got ",
              resolution_s);
  if (peer->link_scale >= 1 || layers.empty()) return plan;

  double transfer = 0;
  for (const LayerCost& layer : layers) transfer += layer.transfer_s;
  if (resolution_s < 0) resolution_s = default_resolution(layers);
  plan.bound_s = static_cast<double>(layers.size()) * resolution_s;
  std::vector<double> grids;
  for (double grid = transfer / 64; grid > 4 * resolution_s && grids.size() < 3; grid /= 4) {
    grids.push_back(grid);
  }
  grids.push_back(resolution_s);
  double incumbent = single.completion_s;
  std::vector<size_t> ends;
  std::vector<Route> routes;
  // Coarse passes first: their best plans make the fine pass's pruning sharp.
  for (const double grid : grids) {
    BucketPlanner planner(layers, costs, *peer, grid, incumbent);
    std::vector<size_t> pass_ends;
    std::vector<Route> pass_routes;
    if (planner.run(pass_ends, pass_routes)) {
      const double completion =
          simulate_parallel_switch(layers, costs, *peer, pass_ends, pass_routes).completion_s;
      if (completion < incumbent) {
        incumbent = completion;
        ends = std::move(pass_ends);
        routes = std::move(pass_routes);
      }
    }
  }
  // A plan within kMinGain of the single-route plan's time goes to the single route, which needs
  // no peer device, its link or its memory (costs the model leaves out).
  if (ends.empty() || !(incumbent < single.completion_s * (1 - kMinGain))) return plan;
  if (std::count(routes.begin(), routes.end(), Route::kPeer) == 0) return plan;
  plan.ends = std::move(ends);
  plan.routes = std::move(routes);
  plan.completion_s = incumbent;
  plan.planner = "parallel";
  return plan;
}

double default_resolution(std::span<const LayerCost> layers) {
  double transfer = 0;
  for (const LayerCost& layer : layers) transfer += layer.transfer_s;
  return layers.empty() ? 0 : transfer / (32.0 * static_cast<double>(layers.size()));
}

}  // namespace ferry::switch_
