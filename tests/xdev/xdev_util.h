// Helpers for the cross-device copy tests: a fixture that puts the sim (and the caches) into a
// known state, placing a host view's exact layout on any device, reading any tensor's storage
// back without going through copy_ (so the oracle does not depend on the code under test) or
// without any stream (to see that queued work has not run), and a gate that holds a stream until
// the test opens it.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <future>
#include <vector>

#include "ferry/backends/sim/sim.h"
#include "ferry/device/backend.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"
#include "ferry/ferry.h"
#include "ferry/memory/caching_allocator.h"
#include "ferry/memory/pinned_allocator.h"

namespace ferry::testing {

inline const Device kSim0("sim:0");
inline const Device kSim1("sim:1");

// Every test starts from SimConfig{} (2 devices, all peers, no delays, no chaos) unless it
// overrides config(), with the current streams back to the defaults; caches are emptied after.
class XdevTest : public ::testing::Test {
 protected:
  virtual sim::SimConfig config() const { return sim::SimConfig{}; }
  void SetUp() override {
    sim::configure(config());
    for (Device d : {kSim0, kSim1}) set_current_stream(default_stream(d));
  }
  void TearDown() override {
    for (Device d : {kSim0, kSim1}) {
      set_current_stream(default_stream(d));
      device_synchronize(d);
      memory::empty_cache(d);
    }
    memory::pinned_empty_cache();
    sim::configure(sim::SimConfig{});
  }
};

// Every byte of `t`'s storage, read with a synchronous backend copy after waiting for all of
// the device's streams.
inline std::vector<uint8_t> read_storage(const Tensor& t) {
  const size_t n = t.storage().nbytes();
  std::vector<uint8_t> out(n);
  if (n == 0) return out;
  if (t.is_cpu()) {
    std::memcpy(out.data(), t.storage().data(), n);
    return out;
  }
  device_synchronize(t.device());
  get_backend(t.device().type())
      .memcpy(t.device().index(), out.data(), t.storage().data(), n, CopyKind::DeviceToHost);
  return out;
}

// The elements of a sim tensor's storage, read straight from the sim's host mapping without any
// stream. Valid only while no stream may be writing them (the one that would is held by a Gate,
// or has been synchronized): for checking that queued work has not run yet.
template <typename T>
std::vector<T> peek_storage(const Tensor& t) {
  EXPECT_EQ(t.device().type(), DeviceType::Sim);
  const size_t n = t.storage().nbytes() / sizeof(T);
  std::vector<T> out(n);
  if (n > 0) std::memcpy(out.data(), sim::host_address(t.storage().data()), n * sizeof(T));
  return out;
}

// A tensor on `device` with host_view's dtype, sizes, strides, storage offset and lazy bits, over
// new storage holding the same bytes as host_view's storage (pinned when asked, on the host).
inline Tensor place(const Tensor& host_view, Device device, bool pinned = false) {
  const size_t n = host_view.storage().nbytes();
  const int64_t item = static_cast<int64_t>(host_view.element_size());
  const int64_t elements = (static_cast<int64_t>(n) + item - 1) / item;
  Tensor flat = empty(
      {elements},
      TensorOptions(host_view.dtype()).device(device).pinned_memory(pinned && device.is_cpu()));
  if (n > 0) {
    if (device.is_cpu()) {
      std::memcpy(flat.data_ptr(), host_view.storage().data(), n);
    } else {
      device_synchronize(device);
      get_backend(device.type())
          .memcpy(device.index(), flat.data_ptr(), host_view.storage().data(), n,
                  CopyKind::HostToDevice);
    }
  }
  Tensor out = flat.as_strided(host_view.sizes(), host_view.strides(), host_view.storage_offset());
  if (host_view.is_conj()) out = out.conj();
  if (host_view.is_neg()) out = out._neg_view();
  return out;
}

// A host view over `bytes` with t's dtype, sizes, strides, offset and lazy bits (for the oracle).
inline Tensor host_mirror(const Tensor& t, std::vector<uint8_t>& bytes) {
  const int64_t item = static_cast<int64_t>(t.element_size());
  Tensor flat = from_blob(bytes.data(), {static_cast<int64_t>(bytes.size()) / item}, t.dtype());
  Tensor out = flat.as_strided(t.sizes(), t.strides(), t.storage_offset());
  if (t.is_conj()) out = out.conj();
  if (t.is_neg()) out = out._neg_view();
  return out;
}

// Keeps `stream` busy (a host function waiting on the gate) until open() or destruction. The
// wait is bounded so that a copy that wrongly waits on the host fails a test instead of hanging.
class Gate {
 public:
  explicit Gate(const Stream& stream) : stream_(stream) {
    auto opened = promise_.get_future().share();
    enqueue_host_function(stream, [opened] { opened.wait_for(std::chrono::seconds(10)); });
  }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  ~Gate() { open(); }
  void open() {
    if (!open_.exchange(true)) promise_.set_value();
  }

 private:
  Stream stream_;
  std::promise<void> promise_;
  std::atomic<bool> open_{false};
};

}  // namespace ferry::testing
