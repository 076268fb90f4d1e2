// Names of dispatch keys, both ways.
#include "ferry/dispatch/dispatch_key.h"

#include <ostream>
#include <string>

#include "ferry/core/error.h"

namespace ferry {

std::string_view dispatch_key_name(DispatchKey k) {
  switch (k) {
    case DispatchKey::Undefined:
      return "Undefined";
    case DispatchKey::CPU:
      return "CPU";
    case DispatchKey::Sim:
      return "Sim";
    case DispatchKey::CUDA:
      return "CUDA";
    case DispatchKey::BackendSelect:
      return "BackendSelect";
    case DispatchKey::AutogradOther:
      return "AutogradOther";
    case DispatchKey::AutogradCPU:
      return "AutogradCPU";
    case DispatchKey::AutogradSim:
      return "AutogradSim";
    case DispatchKey::AutogradCUDA:
      return "AutogradCUDA";
    case DispatchKey::Tracing:
      return "Tracing";
    case DispatchKey::EndOfKeys:
      break;
  }
  return "InvalidDispatchKey";
}

DispatchKey parse_dispatch_key(std::string_view name) {
  std::string valid;
  for (int i = 0; i < kNumDispatchKeys; ++i) {
    const auto k = static_cast<DispatchKey>(i);
    if (name == dispatch_key_name(k)) return k;
    valid += (i ? ", " : "");
    valid += dispatch_key_name(k);
  }
  FERRY_FAIL_AS(Error, "expected a dispatch key name (one of ", valid, "), but got \"", name, "\"");
}

std::ostream& operator<<(std::ostream& out, DispatchKey k) { return out << dispatch_key_name(k); }

}  // namespace ferry
