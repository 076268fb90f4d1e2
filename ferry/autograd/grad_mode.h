// GradMode: whether operations on tensors that require grad record a graph, per thread, and
// the RAII guards that change it (PyTorch's torch::NoGradGuard / torch::AutoGradMode). With grad
// mode off, operators still run through their autograd kernels but record nothing, and in-place
// writes to leaves that require grad are allowed (optimizer steps).
#pragma once

namespace ferry::autograd {

namespace detail {
// Read by every autograd kernel. Stored inverted so that zero-initialization means enabled.
// Not initial-exec TLS: libferry is also dlopen'ed (by the Python module), and an initial-exec
// variable would make it STATIC_TLS (see the note on the dispatcher's local key sets).
extern thread_local constinit bool tls_grad_disabled;
}  // namespace detail

struct GradMode {
  static bool is_enabled() { return !detail::tls_grad_disabled; }
  static void set_enabled(bool enabled) { detail::tls_grad_disabled = !enabled; }
};

// Sets grad mode for the guard's lifetime and restores the previous value.
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : previous_(GradMode::is_enabled()) {
    GradMode::set_enabled(enabled);
  }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;
  ~AutoGradMode() { GradMode::set_enabled(previous_); }

 private:
  bool previous_;
};

class NoGradGuard : public AutoGradMode {
 public:
  NoGradGuard() : AutoGradMode(false) {}
};

}  // namespace ferry::autograd

namespace ferry {
using autograd::AutoGradMode;
using autograd::GradMode;
using autograd::NoGradGuard;
}  // namespace ferry
