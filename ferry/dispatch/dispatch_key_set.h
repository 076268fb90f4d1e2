// DispatchKeySet: a set of dispatch keys as one 64-bit word, ordered by priority.
// Invariants: key k (other than Undefined) is bit k-1, so the highest set bit is the
// highest-priority key and finding it is one count-leading-zeros; the empty set's highest key
// is Undefined. Sets are values: every operation returns a new set, and all are constexpr.
#pragma once

#include <bit>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <iterator>
#include <string>

#include "ferry/dispatch/dispatch_key.h"

namespace ferry {

// Note [Undefined is no member]
// Undefined has no bit: DispatchKeySet(DispatchKey::Undefined) is the empty set, has(Undefined)
// is false, and highest_priority_key() of the empty set is Undefined. This lets "no tensor and
// nothing included" flow through the same table lookup as every other call (slot 0 of a
// dispatch table is Undefined's), with no branch on the hot path.
class DispatchKeySet {
 public:
  constexpr DispatchKeySet() = default;
  constexpr explicit DispatchKeySet(DispatchKey k) : repr_(bit(k)) {}
  constexpr DispatchKeySet(std::initializer_list<DispatchKey> keys) {
    for (DispatchKey k : keys) repr_ |= bit(k);
  }

  static constexpr DispatchKeySet from_raw(uint64_t repr) {
    DispatchKeySet s;
    s.repr_ = repr & kAllBits;
    return s;
  }
  // Every key.
  static constexpr DispatchKeySet full() { return from_raw(kAllBits); }
  // Every key of lower priority than k (k itself excluded): what a kernel registered at k may
  // redispatch to.
  static constexpr DispatchKeySet below(DispatchKey k) {
    return from_raw(k == DispatchKey::Undefined ? 0 : bit(k) - 1);
  }
  // Every backend key; every autograd key.
  static constexpr DispatchKeySet backends() {
    return DispatchKeySet{DispatchKey::CPU, DispatchKey::Sim, DispatchKey::CUDA};
  }
  static constexpr DispatchKeySet autograd() {
    return DispatchKeySet{DispatchKey::AutogradOther, DispatchKey::AutogradCPU,
                          DispatchKey::AutogradSim, DispatchKey::AutogradCUDA};
  }

  constexpr uint64_t raw() const { return repr_; }
  constexpr bool empty() const { return repr_ == 0; }
  constexpr int size() const { return std::popcount(repr_); }
  constexpr bool has(DispatchKey k) const { return (repr_ & bit(k)) != 0; }
  constexpr bool has_any(DispatchKeySet other) const { return (repr_ & other.repr_) != 0; }
  constexpr bool has_all(DispatchKeySet other) const {
    return (repr_ & other.repr_) == other.repr_;
  }

  constexpr DispatchKeySet add(DispatchKey k) const { return from_raw(repr_ | bit(k)); }
  constexpr DispatchKeySet remove(DispatchKey k) const { return from_raw(repr_ & ~bit(k)); }
  // Note [Redispatch below yourself]
  // remove_above(k) drops k and every key of higher priority, keeping the keys strictly below
  // k. A kernel registered at k that receives the call's set `ks` hands the call down with
  // op.redispatch(ks.remove_above(k), ...): the keys it has handled are gone, the rest (and
  // their order) are untouched. It is `ks & below(k)`; the name says what the caller wants.
  constexpr DispatchKeySet remove_above(DispatchKey k) const { return *this & below(k); }

  // The key whose kernel a call with this set runs: the highest set bit (Note [Key priority]).
  constexpr DispatchKey highest_priority_key() const {
    return static_cast<DispatchKey>(64 - std::countl_zero(repr_));
  }
  // The lowest-priority key in the set; Undefined for the empty set.
  constexpr DispatchKey lowest_priority_key() const {
    return repr_ == 0 ? DispatchKey::Undefined
                      : static_cast<DispatchKey>(std::countr_zero(repr_) + 1);
  }

  friend constexpr DispatchKeySet operator|(DispatchKeySet a, DispatchKeySet b) {
    return from_raw(a.repr_ | b.repr_);
  }
  friend constexpr DispatchKeySet operator&(DispatchKeySet a, DispatchKeySet b) {
    return from_raw(a.repr_ & b.repr_);
  }
  // Set difference: the keys of a that are not in b.
  friend constexpr DispatchKeySet operator-(DispatchKeySet a, DispatchKeySet b) {
    return from_raw(a.repr_ & ~b.repr_);
  }
  friend constexpr DispatchKeySet operator|(DispatchKeySet a, DispatchKey k) { return a.add(k); }
  friend constexpr DispatchKeySet operator-(DispatchKeySet a, DispatchKey k) { return a.remove(k); }
  DispatchKeySet& operator|=(DispatchKeySet other) {
    repr_ |= other.repr_;
    return *this;
  }
  DispatchKeySet& operator&=(DispatchKeySet other) {
    repr_ &= other.repr_;
    return *this;
  }
  friend constexpr bool operator==(DispatchKeySet a, DispatchKeySet b) = default;

  // Iterates the keys from the lowest priority to the highest (the order c10 uses, and the
  // order in which sets print).
  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = DispatchKey;
    using difference_type = std::ptrdiff_t;
    using pointer = const DispatchKey*;
    using reference = DispatchKey;

    constexpr iterator() = default;
    constexpr explicit iterator(uint64_t rest) : rest_(rest) {}
    constexpr DispatchKey operator*() const {
      return static_cast<DispatchKey>(std::countr_zero(rest_) + 1);
    }
    constexpr iterator& operator++() {
      rest_ &= rest_ - 1;
      return *this;
    }
    constexpr iterator operator++(int) {
      iterator old = *this;
      ++*this;
      return old;
    }
    friend constexpr bool operator==(iterator a, iterator b) = default;

   private:
    uint64_t rest_ = 0;
  };
  constexpr iterator begin() const { return iterator(repr_); }
  constexpr iterator end() const { return iterator(0); }

  // "DispatchKeySet(CPU, AutogradCPU)"
  std::string str() const;

 private:
  static constexpr uint64_t kAllBits =
      kNumDispatchKeys - 1 == 64 ? ~uint64_t{0} : (uint64_t{1} << (kNumDispatchKeys - 1)) - 1;
  static constexpr uint64_t bit(DispatchKey k) {
    return k == DispatchKey::Undefined || k >= DispatchKey::EndOfKeys
               ? 0
               : uint64_t{1} << (static_cast<int>(k) - 1);
  }

  uint64_t repr_ = 0;
};

std::ostream& operator<<(std::ostream& out, DispatchKeySet ks);

// The key set every call starts from besides its tensors (Note [BackendSelect is always on]).
inline constexpr DispatchKeySet kAlwaysIncludedKeys{DispatchKey::BackendSelect};

// Note [BackendSelect is always on]
// BackendSelect sits in every call's key set. Its default fallback is a fallthrough, and
// fallthrough keys are masked out of a call's set before the lookup (Note [Fallthrough is a
// mask]), so an operator that registers no BackendSelect kernel never sees it, at the cost of
// one OR. An operator whose tensors cannot say where it should run (a factory) registers a
// BackendSelect kernel that reads its dtype/device arguments and redispatches to that backend.

static_assert(DispatchKeySet(DispatchKey::CPU).highest_priority_key() == DispatchKey::CPU);
static_assert(DispatchKeySet().highest_priority_key() == DispatchKey::Undefined);
static_assert(DispatchKeySet({DispatchKey::CPU, DispatchKey::AutogradCPU, DispatchKey::Tracing})
                  .remove_above(DispatchKey::AutogradCPU) == DispatchKeySet(DispatchKey::CPU));

}  // namespace ferry
