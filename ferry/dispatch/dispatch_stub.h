// DispatchStub: one kernel pointer per device type for a backend-agnostic operation (the copy
// path's copy_stub), the layer under the Dispatcher where code already knows its device type.
// A stub is constant-initialized (no static-initialization-order hazard for registrations from
// other files), registered once per device type, and read with one atomic load per call.
//   header:     FERRY_DECLARE_DISPATCH(copy_fn, copy_stub);
//   one .cc:    FERRY_DEFINE_DISPATCH(copy_stub);
//   backend:    FERRY_REGISTER_DISPATCH(copy_stub, DeviceType::CPU, &copy_kernel_cpu);
//   call:       copy_stub(DeviceType::CPU, iter, non_blocking);
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <exception>
#include <utility>

#include "ferry/core/device.h"

namespace ferry {

namespace detail {
// Raises NotImplementedError naming the stub, the device type and the types that have kernels.
[[noreturn]] void fail_missing_stub_kernel(const char* stub, DeviceType type, uint32_t registered);
[[noreturn]] void fail_duplicate_stub_kernel(const char* stub, DeviceType type);
[[noreturn]] void fail_bad_device_type(const char* stub, DeviceType type);
}  // namespace detail

template <typename FnPtr>
class DispatchStub;

template <typename R, typename... Args>
class DispatchStub<R (*)(Args...)> {
 public:
  using FnPtr = R (*)(Args...);

  constexpr explicit DispatchStub(const char* name) : name_(name) {}
  DispatchStub(const DispatchStub&) = delete;
  DispatchStub& operator=(const DispatchStub&) = delete;

  template <typename... A>
  R operator()(DeviceType type, A&&... args) const {
    return get(type)(std::forward<A>(args)...);
  }

  // The kernel for `type`; raises NotImplementedError when none is registered.
  FnPtr get(DeviceType type) const {
    const auto i = static_cast<size_t>(type);
    FnPtr fn = i < table_.size() ? table_[i].load(std::memory_order_acquire) : nullptr;
    if (fn == nullptr) [[unlikely]] {
      detail::fail_missing_stub_kernel(name_, type, registered());
    }
    return fn;
  }
  bool has_kernel(DeviceType type) const {
    const auto i = static_cast<size_t>(type);
    return i < table_.size() && table_[i].load(std::memory_order_acquire) != nullptr;
  }
  const char* name() const { return name_; }

  // Registers `fn` for `type`. Raises ferry::Error when a different kernel is registered there.
  void register_kernel(DeviceType type, FnPtr fn) {
    FnPtr expected = nullptr;
    if (!slot(type).compare_exchange_strong(expected, fn, std::memory_order_acq_rel) &&
        expected != fn) {
      detail::fail_duplicate_stub_kernel(name_, type);
    }
  }
  // Sets (or, with nullptr, clears) the kernel for `type` and returns the previous one: for
  // tests and for backends that are loaded and unloaded at run time.
  FnPtr replace_kernel(DeviceType type, FnPtr fn) {
    return slot(type).exchange(fn, std::memory_order_acq_rel);
  }

 private:
  std::atomic<FnPtr>& slot(DeviceType type) {
    const auto i = static_cast<size_t>(type);
    if (i >= table_.size()) detail::fail_bad_device_type(name_, type);
    return table_[i];
  }
  uint32_t registered() const {
    uint32_t mask = 0;
    for (size_t i = 0; i < table_.size(); ++i) {
      if (table_[i].load(std::memory_order_relaxed) != nullptr) mask |= 1u << i;
    }
    return mask;
  }

  const char* name_;
  std::array<std::atomic<FnPtr>, kNumDeviceTypes> table_{};
};

namespace detail {

// Registers at load time; a conflicting registration prints the error and aborts (a build bug).
void report_stub_registration_failure(const char* stub, const char* file, int line,
                                      const char* what);

template <typename Stub>
struct DispatchStubRegistrar {
  DispatchStubRegistrar(Stub& stub, DeviceType type, typename Stub::FnPtr fn, const char* file,
                        int line) {
    try {
      stub.register_kernel(type, fn);
    } catch (const std::exception& e) {
      report_stub_registration_failure(stub.name(), file, line, e.what());
    }
  }
};

}  // namespace detail
}  // namespace ferry

// In a header, inside the namespace the stub lives in.
#define FERRY_DECLARE_DISPATCH(fn_type, name)                               \
  struct name##_stub_type : ::ferry::DispatchStub<fn_type> {                \
    constexpr name##_stub_type() : ::ferry::DispatchStub<fn_type>(#name) {} \
  };                                                                        \
  extern name##_stub_type name

// In exactly one .cc, in the same namespace.
#define FERRY_DEFINE_DISPATCH(name) constinit name##_stub_type name

#define FERRY_STUB_CONCAT_INNER(a, b) a##b
#define FERRY_STUB_CONCAT(a, b) FERRY_STUB_CONCAT_INNER(a, b)
// In a backend's .cc: registers `fn` for `device_type` when the library loads.
#define FERRY_REGISTER_DISPATCH(name, device_type, fn)                   \
  static const ::ferry::detail::DispatchStubRegistrar FERRY_STUB_CONCAT( \
      ferry_stub_registrar_, __COUNTER__)(name, device_type, fn, __FILE__, __LINE__)
