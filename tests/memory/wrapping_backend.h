// A backend for the memory tests that forwards every call to the sim backend, counts the calls,
// and fails chosen ones on demand. Installed under the memory layer only (through
// set_memory_backend_override), so it sees exactly the calls the allocators make; the device
// layer (streams, guards) keeps talking to the sim directly. Handles pass through unchanged.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/device/backend.h"
#include "ferry/memory/device_allocator.h"

namespace ferry::testing {

class WrappingBackend final : public Backend {
 public:
  explicit WrappingBackend(Backend& inner) : inner_(inner) {}

  // Calls made so far (every method counts).
  int64_t calls() const { return calls_.load(); }
  // The n-th event_record from now (1: the next one) raises DeviceError; 0 turns it off.
  void fail_event_record_at(int n) { record_countdown_.store(n); }
  int64_t failed_records() const { return failed_records_.load(); }
  // Every stream_synchronize raises DeviceError while on.
  void fail_stream_synchronize(bool on) { fail_stream_sync_.store(on); }

  DeviceType type() const override { return inner_.type(); }
  std::string_view display_name() const override { return inner_.display_name(); }
  int device_count() override { return count(), inner_.device_count(); }
  std::string unavailable_reason() override { return count(), inner_.unavailable_reason(); }
  int current_device() override { return count(), inner_.current_device(); }
  void set_current_device(int d) override { count(), inner_.set_current_device(d); }
  void device_synchronize(int d) override { count(), inner_.device_synchronize(d); }
  MemoryInfo memory_info(int d) override { return count(), inner_.memory_info(d); }
  std::vector<std::pair<std::string, std::string>> settings() override {
    return count(), inner_.settings();
  }

  void* malloc(int d, size_t n) override { return count(), inner_.malloc(d, n); }
  void free(int d, void* p) override { count(), inner_.free(d, p); }
  void* malloc_host(size_t n) override { return count(), inner_.malloc_host(n); }
  void free_host(void* p) override { count(), inner_.free_host(p); }
  bool is_pinned(const void* p) override { return count(), inner_.is_pinned(p); }
  bool is_pinned_range(const void* p, size_t n) override {
    return count(), inner_.is_pinned_range(p, n);
  }

  void memset(int d, void* dst, int v, size_t n) override { count(), inner_.memset(d, dst, v, n); }
  void memcpy(int d, void* dst, const void* src, size_t n, CopyKind k) override {
    count(), inner_.memcpy(d, dst, src, n, k);
  }
  void memset_async(int d, void* dst, int v, size_t n, RawStream s) override {
    count(), inner_.memset_async(d, dst, v, n, s);
  }
  void memcpy_async(int d, void* dst, const void* src, size_t n, CopyKind k, RawStream s) override {
    count(), inner_.memcpy_async(d, dst, src, n, k, s);
  }
  void memcpy_peer_async(void* dst, int dd, const void* src, int sd, size_t n, int stream_device,
                         RawStream s) override {
    count(), inner_.memcpy_peer_async(dst, dd, src, sd, n, stream_device, s);
  }

  RawStream default_stream(int d) override { return count(), inner_.default_stream(d); }
  RawStream stream_create(int d) override { return count(), inner_.stream_create(d); }
  void stream_destroy(int d, RawStream s) override { count(), inner_.stream_destroy(d, s); }
  bool stream_query(int d, RawStream s) override { return count(), inner_.stream_query(d, s); }
  void stream_synchronize(int d, RawStream s) override {
    count();
    FERRY_CHECK_AS(DeviceError, !fail_stream_sync_.load(), "sim:", d,
                   ": stream_synchronize: injected failure");
    inner_.stream_synchronize(d, s);
  }
  void stream_wait_event(int d, RawStream s, RawEvent e) override {
    count(), inner_.stream_wait_event(d, s, e);
  }
  void launch_host_func(int d, RawStream s, std::function<void()> fn) override {
    count(), inner_.launch_host_func(d, s, std::move(fn));
  }

  RawEvent event_create(int d, bool timing) override {
    return count(), inner_.event_create(d, timing);
  }
  void event_destroy(int d, RawEvent e) override { count(), inner_.event_destroy(d, e); }
  void event_record(int d, RawEvent e, RawStream s) override {
    count();
    if (record_countdown_.load() > 0 && record_countdown_.fetch_sub(1) == 1) {
      ++failed_records_;
      FERRY_FAIL_AS(DeviceError, "sim:", d, ": event_record: injected failure");
    }
    inner_.event_record(d, e, s);
  }
  bool event_query(int d, RawEvent e) override { return count(), inner_.event_query(d, e); }
  void event_synchronize(int d, RawEvent e) override { count(), inner_.event_synchronize(d, e); }
  float event_elapsed_ms(int d, RawEvent a, RawEvent b) override {
    return count(), inner_.event_elapsed_ms(d, a, b);
  }

  bool can_access_peer(int d, int p) override { return count(), inner_.can_access_peer(d, p); }
  void enable_peer_access(int d, int p) override { count(), inner_.enable_peer_access(d, p); }

  IpcHandle ipc_export(int d, void* p) override { return count(), inner_.ipc_export(d, p); }
  void* ipc_import(const IpcHandle& h) override { return count(), inner_.ipc_import(h); }
  void ipc_close(int d, void* p) override { count(), inner_.ipc_close(d, p); }

 private:
  void count() { calls_.fetch_add(1, std::memory_order_relaxed); }

  Backend& inner_;
  std::atomic<int64_t> calls_{0};
  std::atomic<int> record_countdown_{0};
  std::atomic<int64_t> failed_records_{0};
  std::atomic<bool> fail_stream_sync_{false};
};

// Puts a WrappingBackend around the sim under the memory layer for the scope's lifetime.
class ScopedWrappedSim {
 public:
  ScopedWrappedSim() : wrapper_(get_backend(DeviceType::Sim)) {
    previous_ = memory::detail::set_memory_backend_override(DeviceType::Sim, &wrapper_);
  }
  ScopedWrappedSim(const ScopedWrappedSim&) = delete;
  ScopedWrappedSim& operator=(const ScopedWrappedSim&) = delete;
  ~ScopedWrappedSim() { memory::detail::set_memory_backend_override(DeviceType::Sim, previous_); }

  WrappingBackend* get() { return &wrapper_; }
  WrappingBackend* operator->() { return &wrapper_; }

 private:
  WrappingBackend wrapper_;
  Backend* previous_ = nullptr;
};

}  // namespace ferry::testing
