// DispatchStub errors.
#include "ferry/dispatch/dispatch_stub.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "ferry/core/error.h"

namespace ferry::detail {

void fail_missing_stub_kernel(const char* stub, DeviceType type, uint32_t registered) {
  std::string listed;
  for (int i = 0; i < kNumDeviceTypes; ++i) {
    if ((registered >> i) & 1u) {
      listed +=
          (listed.empty() ? "" : ", ") + std::string(device_type_name(static_cast<DeviceType>(i)));
    }
  }
  FERRY_FAIL_AS(
      NotImplementedError, stub, ": no kernel for device type ",
      static_cast<int>(type) < kNumDeviceTypes ? std::string(device_type_name(type))
                                               : "#" + std::to_string(static_cast<int>(type)),
      listed.empty() ? "; no device type has one" : "; kernels are registered for ", listed);
}

void fail_duplicate_stub_kernel(const char* stub, DeviceType type) {
  FERRY_FAIL_AS(Error, stub, ": expected one kernel for device type ", device_type_name(type),
                ", but a different one is registered already");
}

void fail_bad_device_type(const char* stub, DeviceType type) {
  FERRY_FAIL_AS(Error, stub, ": expected a device type, but got the value ",
                static_cast<int>(type));
}

void report_stub_registration_failure(const char* stub, const char* file, int line,
                                      const char* what) {
  std::fprintf(stderr, "ferry: registering a kernel for %s at %s:%d failed: %s\n", stub, file, line,
               what);
  std::abort();
}

}  // namespace ferry::detail
