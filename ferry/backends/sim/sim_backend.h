// SimBackend: the device contract implemented in software (see ferry/device/backend.h for the
// contract and ferry/backends/sim/sim.h for the settings). Memory lives in SimMemory, work runs
// on SimStream workers; this class validates every call (pointers must belong to the device the
// call names; device-to-device access across devices needs peer access) and prices copies by
// link. Internal to the sim backend.
// Invariants: streams are never freed (a destroyed stream is only stopped), so raw handles held
// by events and queued waits stay valid; settings read by workers are atomics.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "ferry/backends/sim/sim.h"
#include "ferry/backends/sim/sim_memory.h"
#include "ferry/backends/sim/sim_stream.h"
#include "ferry/device/backend.h"

namespace ferry::sim::detail {

class SimBackend final : public Backend {
 public:
  SimBackend();

  DeviceType type() const override { return DeviceType::Sim; }
  std::string_view display_name() const override { return "sim"; }

  int device_count() override { return device_count_.load(std::memory_order_acquire); }
  std::string unavailable_reason() override;
  int current_device() override;
  void set_current_device(int device) override;
  void device_synchronize(int device) override;
  MemoryInfo memory_info(int device) override;
  std::vector<std::pair<std::string, std::string>> settings() override;
  bool runs_on_host_cpus() const override { return true; }

  void* malloc(int device, size_t nbytes) override;
  void free(int device, void* ptr) override;
  void* malloc_host(size_t nbytes) override;
  void free_host(void* ptr) override;
  bool is_pinned(const void* ptr) override { return memory_.is_pinned(ptr); }
  bool is_pinned_range(const void* ptr, size_t nbytes) override {
    return memory_.is_pinned(ptr, nbytes == 0 ? 1 : nbytes);
  }
  void host_register(void* ptr, size_t nbytes) override;
  void host_unregister(void* ptr) override;
  void* host_device_pointer(int device, void* ptr, size_t nbytes) override;
  void release_host_device_pointer(int device, void* device_ptr) override;

  void memset(int device, void* dst, int value, size_t nbytes) override;
  void memcpy(int device, void* dst, const void* src, size_t nbytes, CopyKind kind) override;
  void memset_async(int device, void* dst, int value, size_t nbytes, RawStream stream) override;
  void memcpy_async(int device, void* dst, const void* src, size_t nbytes, CopyKind kind,
                    RawStream stream) override;
  void memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device, size_t nbytes,
                         int stream_device, RawStream stream) override;
  void memcpy_batch_async(int device, std::span<const CopyRange> ranges, CopyKind kind,
                          RawStream stream) override;
  MemoryRange memory_range(int device, const void* ptr) override;

  RawStream default_stream(int device) override;
  RawStream stream_create(int device) override;
  RawStream stream_create_with_priority(int device, int priority) override;
  std::pair<int, int> stream_priority_range(int device) override;
  void stream_destroy(int device, RawStream stream) override;
  bool stream_query(int device, RawStream stream) override;
  void stream_synchronize(int device, RawStream stream) override;
  void stream_wait_event(int device, RawStream stream, RawEvent event) override;
  void launch_host_func(int device, RawStream stream, std::function<void()> fn) override;

  RawEvent event_create(int device, bool enable_timing) override;
  void event_destroy(int device, RawEvent event) override;
  void event_record(int device, RawEvent event, RawStream stream) override;
  bool event_query(int device, RawEvent event) override;
  void event_synchronize(int device, RawEvent event) override;
  float event_elapsed_ms(int device, RawEvent start, RawEvent end) override;
  RawEvent event_create_interprocess(int device) override;
  IpcHandle event_ipc_export(int device, RawEvent event) override;
  RawEvent event_ipc_import(const IpcHandle& handle) override;

  bool can_access_peer(int device, int peer) override;
  void enable_peer_access(int device, int peer) override;

  IpcHandle ipc_export(int device, void* ptr) override;
  void* ipc_import(const IpcHandle& handle) override;
  void ipc_close(int device, void* ptr) override;

  // sim.h
  SimConfig config() const;
  void configure(const SimConfig& config);
  char* host_address(const void* ptr) const { return memory_.host_address(ptr); }
  int device_of(const void* ptr) const { return memory_.device_of(ptr); }
  bool is_host_mapped(const void* ptr) const { return memory_.is_host_mapped(ptr); }
  // The same device, or a peer whose access `device` has enabled.
  bool peer_enabled(int device, int peer) const;
  ComputeModel compute_model() const {
    return {compute_rate_.load(std::memory_order_relaxed),
            compute_timing_only_.load(std::memory_order_relaxed),
            bandwidth_[static_cast<size_t>(Link::HostToDevice)].load(std::memory_order_relaxed)};
  }
  uint64_t pending_operations(int device, RawStream stream) const {
    return stream_of(device, stream, "pending_operations").pending();
  }

 private:
  void check_device(int device, const char* call) const;
  SimStream& stream_of(int device, RawStream stream, const char* call) const;
  std::shared_ptr<SimStream> new_stream(int device);
  // Waits for the work queued on every stream (not from a worker thread: see free()).
  void drain_all_streams() const;
  void apply(const SimConfig& config);  // caller holds config_mutex_
  std::chrono::nanoseconds cost(Link link, size_t nbytes) const;
  // memcpy_async's checks and operation for one range: sets the link it crosses and whether its
  // host side (if any) is pinned.
  SimOp copy_op(int device, void* dst, const void* src, size_t nbytes, CopyKind kind,
                const char* call, Link& link, bool& pinned);
  // Enqueues a copy; with pageable host memory (`host` names it in errors), waits for it.
  void enqueue_copy(SimStream& s, SimOp&& op, bool pinned, int device, CopyKind kind,
                    const void* host, const char* call);

  mutable std::mutex config_mutex_;
  SimConfig config_;
  std::string env_error_;  // a bad FERRY_SIM_* setting: no devices until configure()
  std::atomic<int> device_count_{0};
  std::atomic<size_t> memory_limit_{0};
  std::array<std::atomic<double>, kNumLinks> bandwidth_{};
  std::array<std::atomic<int64_t>, kNumLinks> latency_ns_{};
  std::atomic<double> compute_rate_{0};
  std::atomic<bool> compute_timing_only_{false};
  // One bit per (device, peer): allowed by the config / enabled by enable_peer_access.
  std::array<std::array<std::atomic<uint64_t>, 2>, kMaxSimDevices> peer_allowed_{};
  std::array<std::array<std::atomic<uint64_t>, 2>, kMaxSimDevices> peer_enabled_{};
  SimKnobs knobs_;

  SimMemory memory_;

  mutable std::mutex streams_mutex_;
  std::vector<std::shared_ptr<SimStream>> streams_;  // every stream ever made, for draining
  std::array<std::atomic<SimStream*>, kMaxSimDevices> default_streams_{};
  int next_serial_ = 0;
};

// The registered sim backend (created on first use).
SimBackend& sim_backend();

}  // namespace ferry::sim::detail
