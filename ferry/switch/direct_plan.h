// Planning direct host access (DeepPlan, EuroSys'23) together with the grouping: which layers
// read their weights in place from the pinned image (mapped into the device) instead of copying
// them, and how the copied layers are grouped.
//
// The model extends grouping.h's: a direct layer's transfer vanishes and its compute time grows
// by `direct_extra_s` (its bytes read from host memory over the host-read bandwidth, measured).
// A group's copy is one copy per maximal run of its non-direct layers (the image's bytes of a
// direct layer are skipped), each paying `copy_overhead_s`; a group with at least one copy pays
// `wait_s` after its last copy before its first layer starts, a group of direct layers only
// waits for nothing. With no direct layer this is exactly simulate_switch.
//
// Guarantees: for a fixed set of direct layers the grouping is optimal (exact dynamic programming
// over (layers done, copies made), O(n^3)). The set is chosen by enumerating every subset of the
// eligible layers (finite direct_extra_s, bytes > 0) when there are at most `max_candidates` of
// them, so the plan is then optimal over all 2^n direct sets times 2^(n-1) groupings; with more,
// only the `max_candidates` eligible layers with the largest transfer_s - direct_extra_s are
// considered and the others stay copied (DirectPlan::exact is false), so the plan is optimal over
// that restricted family and never worse than group_optimally (the empty set is in it).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "ferry/switch/grouping.h"

namespace ferry::switch_ {

struct DirectPlan {
  Grouping grouping;         // completion_s as simulate_direct_switch gives it
  std::vector<bool> direct;  // one flag per layer
  bool exact = true;         // false when eligible layers were left out of the enumeration
  size_t candidates = 0;     // eligible layers enumerated
};

// Raises ferry::Error unless `extra` has one entry per layer, each non-negative (infinity: the
// layer cannot go direct), and `direct` (when given) marks only eligible layers.
void check_direct(std::span<const LayerCost> layers, std::span<const double> extra,
                  const std::vector<bool>& direct);

// The timeline of a switch with the given direct layers (direct spans on the copy stream are
// absent; one copy span per copy). `direct` as in DirectPlan, or empty: none.
SwitchTimeline simulate_direct_switch(std::span<const LayerCost> layers, const GroupCosts& costs,
                                      std::span<const double> direct_extra_s,
                                      const std::vector<bool>& direct,
                                      std::span<const size_t> ends);

// The best grouping for a fixed direct set (exact).
Grouping group_optimally_direct(std::span<const LayerCost> layers, const GroupCosts& costs,
                                std::span<const double> direct_extra_s,
                                const std::vector<bool>& direct);

// The best direct set and grouping (see above for when it is exact).
DirectPlan plan_direct(std::span<const LayerCost> layers, const GroupCosts& costs,
                       std::span<const double> direct_extra_s, size_t max_candidates = 14);

}  // namespace ferry::switch_
