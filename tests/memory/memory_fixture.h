// Shared helpers for the memory tests: a fixture that starts every test from a known sim config
// and allocator state (default settings, empty caches) and checks the allocator's invariants at
// the end, device_bytes (a sim byte tensor), a StreamGate that keeps a sim stream busy until
// the test opens it, and a DelayedOpener that opens a gate a little later from another thread.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "ferry/backends/sim/sim.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"
#include "ferry/memory/alloc_config.h"
#include "ferry/memory/caching_allocator.h"
#include "ferry/memory/pinned_allocator.h"
#include "ferry/ops/factories.h"

namespace ferry::testing {

inline const Device kSim0("sim:0");
inline const Device kSim1("sim:1");

// An uninitialized byte tensor of n bytes on `device`.
inline Tensor device_bytes(size_t n, Device device = kSim0) {
  return empty({static_cast<int64_t>(n)}, TensorOptions(kByte).device(device));
}

// Returns every cached byte to the sim (both devices and pinned memory), so that the sim can be
// reconfigured and each test starts with empty caches.
inline void release_caches() {
  for (Device d : {kSim0, kSim1}) memory::empty_cache(d);
  memory::pinned_empty_cache();
}

// The default sim, plus the chaos setting of FERRY_SIM_CHAOS from the environment (if any), so
// that a chaos run of the suite reaches these tests too. Tests that change the sim start here.
inline sim::SimConfig default_sim_config() {
  sim::SimConfig c;
  const sim::SimConfig env = sim::SimConfig::from_env();
  c.chaos_seed = env.chaos_seed;
  c.chaos_max_delay = env.chaos_max_delay;
  return c;
}

class MemoryTest : public ::testing::Test {
 protected:
  virtual sim::SimConfig config() const { return default_sim_config(); }

  void SetUp() override {
    release_caches();
    memory::set_alloc_config(memory::AllocConfig{});
    sim::configure(config());
    for (Device d : {kSim0, kSim1}) {
      memory::set_memory_fraction(1.0, d);
      memory::reset_accumulated_stats(d);
      memory::reset_peak_stats(d);
    }
  }

  void TearDown() override {
    for (Device d : {kSim0, kSim1}) {
      device_synchronize(d);
      EXPECT_NO_THROW(memory::check_invariants(d));
      EXPECT_EQ(memory::stats(d).allocation.current, 0) << "a test leaked an allocation on " << d;
    }
    release_caches();
    memory::set_alloc_config(memory::AllocConfig{});
    for (Device d : {kSim0, kSim1}) memory::set_memory_fraction(1.0, d);
    sim::configure(default_sim_config());
  }
};

// Keeps `stream` busy (a host function waiting on the gate) until open() or destruction, so a
// failing assertion never leaves a stream blocked.
class StreamGate {
 public:
  explicit StreamGate(const Stream& stream) : stream_(stream) {
    auto opened = promise_.get_future().share();
    enqueue_host_function(stream, [opened] { opened.wait(); });
  }
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;
  ~StreamGate() { open(); }

  // Safe to call from any thread, any number of times.
  void open() {
    if (!open_.exchange(true)) promise_.set_value();
  }
  // Opens and waits until the stream has passed the gate.
  void open_and_wait() {
    open();
    stream_.synchronize();
  }

 private:
  Stream stream_;
  std::promise<void> promise_;
  std::atomic<bool> open_{false};
};

// Opens `gate` from another thread 50 ms after construction, so that a call made meanwhile has
// to wait for the gated stream; the destructor joins the thread (bounded: it only sleeps).
class DelayedOpener {
 public:
  explicit DelayedOpener(StreamGate& gate)
      : thread_([&gate] {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          gate.open();
        }) {}
  DelayedOpener(const DelayedOpener&) = delete;
  DelayedOpener& operator=(const DelayedOpener&) = delete;
  ~DelayedOpener() { thread_.join(); }

 private:
  std::thread thread_;
};

constexpr size_t kMiB = size_t{1} << 20;

}  // namespace ferry::testing
