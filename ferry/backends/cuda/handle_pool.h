// Library handles (cuBLAS, cuDNN) per (device, thread), as PyTorch keeps them: a thread creates
// a handle on its first call on a device, keeps it while it lives, and hands it back to a
// per-device free list when it exits, where the next new thread picks it up. Handles are never
// destroyed: destroying them at process exit would race the CUDA runtime's own teardown. A
// handle is thus never used by two threads at once; callers bind it to their stream per call.
#pragma once

#include <mutex>
#include <vector>

namespace ferry::cuda {

// Traits: `Handle` and `static Handle create()` (called with the device current).
template <typename Traits>
class HandlePool {
 public:
  using Handle = typename Traits::Handle;

  // The calling thread's handle for `device` (which the caller has made current).
  static Handle get(int device) {
    thread_local Owned owned;
    if (static_cast<size_t>(device) >= owned.handles.size()) {
      owned.handles.resize(static_cast<size_t>(device) + 1, Handle{});
    }
    Handle& h = owned.handles[static_cast<size_t>(device)];
    if (h == Handle{}) h = take(device);
    return h;
  }

 private:
  struct Shared {
    std::mutex mutex;
    std::vector<std::vector<Handle>> free;  // per device
  };
  // Leaked on purpose: threads may exit (and return their handles) after static destruction.
  static Shared& shared() {
    static Shared* s = new Shared();
    return *s;
  }
  static Handle take(int device) {
    {
      Shared& s = shared();
      std::lock_guard<std::mutex> lock(s.mutex);
      if (static_cast<size_t>(device) < s.free.size() &&
          !s.free[static_cast<size_t>(device)].empty()) {
        Handle h = s.free[static_cast<size_t>(device)].back();
        s.free[static_cast<size_t>(device)].pop_back();
        return h;
      }
    }
    return Traits::create();
  }
  struct Owned {
    std::vector<Handle> handles;
    ~Owned() {
      Shared& s = shared();
      std::lock_guard<std::mutex> lock(s.mutex);
      for (size_t d = 0; d < handles.size(); ++d) {
        if (handles[d] == Handle{}) continue;
        if (d >= s.free.size()) s.free.resize(d + 1);
        s.free[d].push_back(handles[d]);
      }
    }
  };
};

}  // namespace ferry::cuda
