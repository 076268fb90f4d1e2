// RegistrationHandle: the RAII result of registering with the Dispatcher (an operator
// definition, a kernel, a fallback). Destroying or reset()-ing it deregisters, restoring what
// served before; release() keeps the registration for the program's lifetime.
#pragma once

#include <functional>
#include <utility>

namespace ferry {

class [[nodiscard]] RegistrationHandle {
 public:
  RegistrationHandle() = default;
  explicit RegistrationHandle(std::function<void()> deregister)
      : deregister_(std::move(deregister)) {}
  RegistrationHandle(RegistrationHandle&& other) noexcept
      : deregister_(std::exchange(other.deregister_, nullptr)) {}
  RegistrationHandle& operator=(RegistrationHandle&& other) noexcept {
    if (this != &other) {
      reset();
      deregister_ = std::exchange(other.deregister_, nullptr);
    }
    return *this;
  }
  RegistrationHandle(const RegistrationHandle&) = delete;
  RegistrationHandle& operator=(const RegistrationHandle&) = delete;
  ~RegistrationHandle() { reset(); }

  // Whether this handle still owns a registration.
  bool active() const { return static_cast<bool>(deregister_); }
  // Deregisters now (no-op when inactive).
  void reset() {
    if (auto f = std::exchange(deregister_, nullptr)) f();
  }
  // Gives up ownership: the registration stays until the process ends.
  void release() { deregister_ = nullptr; }

 private:
  std::function<void()> deregister_;
};

}  // namespace ferry
