// DispatchKey: the rows of every operator's dispatch table, one per concern (a backend, autograd
// for a backend, tracing). A key's numeric value is its priority: a larger value is consulted
// first. Keys are not extensible at run time; adding one is a change to this file.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string_view>

#include "ferry/core/device.h"

namespace ferry {

// Note [Key priority]
// The dispatcher runs the kernel of the highest-priority key in a call's key set, and a kernel
// that handles a concern redispatches to the keys below itself. So the order below is the order
// in which the concerns wrap a call, outermost last:
//   Tracing        records the call, then hands it down;
//   Autograd*      records a graph node, then hands it down;
//   BackendSelect  picks a backend for operators whose tensors don't say (factories);
//   CUDA > Sim > CPU: among tensors on different devices the non-CPU side wins, which is the
//                  copy path's rule ("a non-CPU side wins", DESIGN.md) made structural.
// Undefined is not a key of any set; it is what an empty set's highest key is.
enum class DispatchKey : uint8_t {
  Undefined = 0,
  // Backend keys, one per DeviceType (Note [Backend keys]).
  CPU,
  Sim,
  CUDA,
  // Chooses a backend from non-tensor arguments (dtype, device); always in the key set of a
  // call, with a fallthrough fallback so that only operators that register it pay attention.
  BackendSelect,
  // Autograd for tensors whose backend has no autograd key of its own; room for new backends.
  AutogradOther,
  AutogradCPU,
  AutogradSim,
  AutogradCUDA,
  // Records operator calls (the include set adds it; see ferry/dispatch/tracing.h).
  Tracing,
  EndOfKeys,  // not a key: the number of keys, and the size of each dispatch table
};

inline constexpr int kNumDispatchKeys = static_cast<int>(DispatchKey::EndOfKeys);
// DispatchKeySet is a 64-bit mask with one bit per key other than Undefined.
static_assert(kNumDispatchKeys - 1 <= 64, "DispatchKeySet holds at most 64 keys");

// Note [Backend keys]
// There is one backend key per DeviceType, in DeviceType's order, so that the backend key of a
// tensor is an addition, and backend i's autograd key is AutogradCPU + i. Both facts are
// checked here, so adding a device type without its keys fails to compile.
static_assert(kNumDeviceTypes == 3, "add a backend key and an autograd key for the new device");
static_assert(static_cast<int>(DispatchKey::CPU) + static_cast<int>(DeviceType::Sim) ==
              static_cast<int>(DispatchKey::Sim));
static_assert(static_cast<int>(DispatchKey::CPU) + static_cast<int>(DeviceType::CUDA) ==
              static_cast<int>(DispatchKey::CUDA));
static_assert(static_cast<int>(DispatchKey::AutogradCPU) + static_cast<int>(DeviceType::CUDA) ==
              static_cast<int>(DispatchKey::AutogradCUDA));

constexpr DispatchKey backend_key(DeviceType type) {
  return static_cast<DispatchKey>(static_cast<int>(DispatchKey::CPU) + static_cast<int>(type));
}
constexpr DispatchKey autograd_key(DeviceType type) {
  return static_cast<DispatchKey>(static_cast<int>(DispatchKey::AutogradCPU) +
                                  static_cast<int>(type));
}
constexpr bool is_backend_key(DispatchKey k) {
  return k >= DispatchKey::CPU && k <= DispatchKey::CUDA;
}
constexpr bool is_autograd_key(DispatchKey k) {
  return k >= DispatchKey::AutogradOther && k <= DispatchKey::AutogradCUDA;
}
// The device type a backend key or a backend's autograd key stands for; nullopt for the others
// (including AutogradOther).
constexpr std::optional<DeviceType> device_type_of(DispatchKey k) {
  if (is_backend_key(k)) {
    return static_cast<DeviceType>(static_cast<int>(k) - static_cast<int>(DispatchKey::CPU));
  }
  if (k >= DispatchKey::AutogradCPU && k <= DispatchKey::AutogradCUDA) {
    return static_cast<DeviceType>(static_cast<int>(k) -
                                   static_cast<int>(DispatchKey::AutogradCPU));
  }
  return std::nullopt;
}

// "CPU", "AutogradSim", "Tracing", ...: the enumerator's name.
std::string_view dispatch_key_name(DispatchKey k);
// Parses an enumerator's name; raises ferry::Error naming the string and the valid names.
DispatchKey parse_dispatch_key(std::string_view name);
std::ostream& operator<<(std::ostream& out, DispatchKey k);

}  // namespace ferry
