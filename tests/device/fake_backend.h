// A second device runtime for tests that need two device types at once (sim plus another) on a
// machine without a GPU. It stands in for the CUDA backend through replace_backend_for_testing
// while a ScopedFakeCuda is alive. Its streams run nothing by themselves: host functions queued
// on them run only when the host synchronizes (a stream, an event recorded on it, the device),
// so a test can tell exactly whether the host synchronized. It pins host memory of its own, so
// the sim can be checked against memory another runtime page-locked. One instance lives for the
// whole process (the stream layer keeps its raw stream handles for ever).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "ferry/core/error.h"
#include "ferry/device/backend.h"
#include "ferry/device/runtime.h"

namespace ferry::testing {

class FakeBackend final : public Backend {
 public:
  struct FakeStream {
    std::deque<std::function<void()>> pending;
    uint64_t queued = 0;  // host functions queued so far
    uint64_t ran = 0;     // host functions run so far
  };
  struct FakeEvent {
    FakeStream* stream = nullptr;
    uint64_t position = 0;  // complete once stream->ran >= position
  };

  // The host synchronizations made so far (stream, event and device).
  int synchronizations() const { return synchronizations_.load(); }

  DeviceType type() const override { return DeviceType::CUDA; }
  std::string_view display_name() const override { return "fake CUDA"; }
  int device_count() override { return 1; }
  std::string unavailable_reason() override { return {}; }
  int current_device() override { return 0; }
  void set_current_device(int /*device*/) override {}
  void device_synchronize(int /*device*/) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++synchronizations_;
    for (auto& s : streams_) run_until(*s, s->queued);
  }
  MemoryInfo memory_info(int /*device*/) override { return {}; }

  void* malloc(int /*device*/, size_t /*nbytes*/) override { unsupported("malloc"); }
  void free(int /*device*/, void* /*ptr*/) override { unsupported("free"); }
  void* malloc_host(size_t nbytes) override {
    void* p = std::malloc(nbytes == 0 ? 1 : nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    pinned_[reinterpret_cast<uintptr_t>(p)] = nbytes;
    return p;
  }
  void free_host(void* ptr) override {
    std::lock_guard<std::mutex> lock(mutex_);
    pinned_.erase(reinterpret_cast<uintptr_t>(ptr));
    std::free(ptr);
  }
  bool is_pinned(const void* ptr) override { return is_pinned_range(ptr, 1); }
  bool is_pinned_range(const void* ptr, size_t nbytes) override {
    const auto address = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pinned_.upper_bound(address);
    if (it == pinned_.begin()) return false;
    --it;
    const size_t offset = address - it->first;
    return offset < it->second && nbytes <= it->second - offset;
  }

  void memset(int, void*, int, size_t) override { unsupported("memset"); }
  void memcpy(int, void*, const void*, size_t, CopyKind) override { unsupported("memcpy"); }
  void memset_async(int, void*, int, size_t, RawStream) override { unsupported("memset_async"); }
  void memcpy_async(int, void*, const void*, size_t, CopyKind, RawStream) override {
    unsupported("memcpy_async");
  }
  void memcpy_peer_async(void*, int, const void*, int, size_t, int, RawStream) override {
    unsupported("memcpy_peer_async");
  }

  RawStream default_stream(int device) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (default_ == nullptr) default_ = new_stream();
    (void)device;
    return default_;
  }
  RawStream stream_create(int /*device*/) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return new_stream();
  }
  void stream_destroy(int /*device*/, RawStream /*stream*/) override {}
  bool stream_query(int /*device*/, RawStream stream) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return as_stream(stream).pending.empty();
  }
  void stream_synchronize(int /*device*/, RawStream stream) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++synchronizations_;
    FakeStream& s = as_stream(stream);
    run_until(s, s.queued);
  }
  void stream_wait_event(int /*device*/, RawStream /*stream*/, RawEvent event) override {
    // Same-runtime waits are not what these tests are about: honour them on the host.
    event_synchronize(0, event);
  }
  void launch_host_func(int /*device*/, RawStream stream, std::function<void()> fn) override {
    std::lock_guard<std::mutex> lock(mutex_);
    FakeStream& s = as_stream(stream);
    s.pending.push_back(std::move(fn));
    ++s.queued;
  }

  RawEvent event_create(int /*device*/, bool /*enable_timing*/) override { return new FakeEvent; }
  void event_destroy(int /*device*/, RawEvent event) override {
    delete static_cast<FakeEvent*>(event);
  }
  void event_record(int /*device*/, RawEvent event, RawStream stream) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto* e = static_cast<FakeEvent*>(event);
    e->stream = &as_stream(stream);
    e->position = e->stream->queued;
  }
  bool event_query(int /*device*/, RawEvent event) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto* e = static_cast<FakeEvent*>(event);
    return e->stream == nullptr || e->stream->ran >= e->position;
  }
  void event_synchronize(int /*device*/, RawEvent event) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++synchronizations_;
    auto* e = static_cast<FakeEvent*>(event);
    if (e->stream != nullptr) run_until(*e->stream, e->position);
  }
  float event_elapsed_ms(int, RawEvent, RawEvent) override { unsupported("event_elapsed_ms"); }

  bool can_access_peer(int device, int peer) override { return device == peer; }
  void enable_peer_access(int /*device*/, int /*peer*/) override {}

  IpcHandle ipc_export(int, void*) override { unsupported("ipc_export"); }
  void* ipc_import(const IpcHandle&) override { unsupported("ipc_import"); }
  void ipc_close(int, void*) override { unsupported("ipc_close"); }

 private:
  [[noreturn]] static void unsupported(const char* call) {
    FERRY_FAIL_AS(DeviceError, "cuda:0: ", call, ": not supported by the fake backend");
  }
  static FakeStream& as_stream(RawStream stream) { return *static_cast<FakeStream*>(stream); }
  FakeStream* new_stream() {  // caller holds mutex_
    streams_.push_back(std::make_unique<FakeStream>());
    return streams_.back().get();
  }
  // Runs queued host functions up to `position` (caller holds mutex_; they must not call back).
  static void run_until(FakeStream& s, uint64_t position) {
    while (s.ran < position && !s.pending.empty()) {
      auto fn = std::move(s.pending.front());
      s.pending.pop_front();
      fn();
      ++s.ran;
    }
  }

  std::mutex mutex_;
  std::deque<std::unique_ptr<FakeStream>> streams_;  // never freed: handles stay valid
  FakeStream* default_ = nullptr;
  std::map<uintptr_t, size_t> pinned_;
  std::atomic<int> synchronizations_{0};
};

inline FakeBackend& fake_backend() {
  static FakeBackend* fake = new FakeBackend();  // leaked: cached stream handles point into it
  return *fake;
}

// Installs the fake as the CUDA backend for its scope. Tests skip when a real CUDA device exists
// (the fake would shadow it and leave its stream handles in the CUDA stream tables).
class ScopedFakeCuda {
 public:
  ScopedFakeCuda() { previous_ = replace_backend_for_testing(DeviceType::CUDA, &fake_backend()); }
  ScopedFakeCuda(const ScopedFakeCuda&) = delete;
  ScopedFakeCuda& operator=(const ScopedFakeCuda&) = delete;
  ~ScopedFakeCuda() { replace_backend_for_testing(DeviceType::CUDA, previous_); }

  static bool real_cuda_present() { return device_count(DeviceType::CUDA) > 0; }

 private:
  Backend* previous_ = nullptr;
};

}  // namespace ferry::testing
