// Shared helpers for the device tests: a fixture that puts the sim device into a known state (the
// documented defaults, whatever FERRY_SIM_* says), RAII holders for sim and pinned memory, and a
// Gate that holds a stream's queue shut until the test opens it (ordering without timing), and
// stream_ms, the time queued work holds a stream.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ferry/backends/sim/sim.h"
#include "ferry/core/error.h"
#include "ferry/device/backend.h"
#include "ferry/device/event.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"

namespace ferry::testing {

// Every test starts from SimConfig{} (2 devices, 4 GiB, all peers, no delays, no chaos) unless it
// overrides config().
class SimTest : public ::testing::Test {
 protected:
  virtual sim::SimConfig config() const { return sim::SimConfig{}; }
  void SetUp() override { sim::configure(config()); }
  void TearDown() override { sim::configure(sim::SimConfig{}); }

  static Backend& sim_backend() { return get_backend(DeviceType::Sim); }
};

// Milliseconds the work that `work` queues on sim:0's current stream holds it (timing events on
// either side).
template <typename Work>
double stream_ms(Work&& work) {
  const Stream s = current_stream(Device("sim:0"));
  Event start(true), end(true);
  start.record(s);
  work();
  end.record(s);
  end.synchronize();
  return start.elapsed_time(end);
}

// Device memory on a sim device, freed at scope end.
class SimBuffer {
 public:
  SimBuffer(int device, size_t nbytes)
      : device_(device),
        nbytes_(nbytes),
        ptr_(get_backend(DeviceType::Sim).malloc(device, nbytes)) {}
  SimBuffer(const SimBuffer&) = delete;
  SimBuffer& operator=(const SimBuffer&) = delete;
  ~SimBuffer() { get_backend(DeviceType::Sim).free(device_, ptr_); }
  void* get() const { return ptr_; }
  size_t size() const { return nbytes_; }
  int device() const { return device_; }

 private:
  int device_;
  size_t nbytes_;
  void* ptr_;
};

// Pinned host memory for the sim, freed at scope end.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(size_t nbytes)
      : nbytes_(nbytes),
        ptr_(static_cast<unsigned char*>(pinned_malloc(DeviceType::Sim, nbytes))) {}
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { pinned_free(DeviceType::Sim, ptr_); }
  unsigned char* get() const { return ptr_; }
  size_t size() const { return nbytes_; }
  bool all_equal(unsigned char value) const {
    for (size_t i = 0; i < nbytes_; ++i) {
      if (ptr_[i] != value) return false;
    }
    return true;
  }

 private:
  size_t nbytes_;
  unsigned char* ptr_;
};

// A host-controlled barrier: enqueue_host_function(stream, gate.blocker()) stops the stream's
// queue until open(). The blocker gives up after `limit` (and timed_out() says so), so a broken
// implementation fails the test instead of hanging it. Opened when destroyed; declare it after the
// buffers the gated work uses, so that it opens before they are freed (free waits for streams).
class Gate {
 public:
  explicit Gate(std::chrono::milliseconds limit = std::chrono::seconds(30))
      : state_(std::make_shared<State>()) {
    state_->limit = limit;
  }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  ~Gate() { open(); }

  std::function<void()> blocker() const {
    return [state = state_] {
      std::unique_lock<std::mutex> lock(state->mutex);
      if (!state->cv.wait_for(lock, state->limit, [&] { return state->is_open; })) {
        state->timed_out = true;
      }
    };
  }
  void open() {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->is_open = true;
    state_->cv.notify_all();
  }
  bool timed_out() const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->timed_out;
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable cv;
    bool is_open = false;
    bool timed_out = false;
    std::chrono::milliseconds limit{0};
  };
  std::shared_ptr<State> state_;
};

// A SimConfig from FERRY_SIM_* values given as a map (the process environment is not touched,
// so nothing leaks into other tests; SimTest's TearDown restores the defaults).
inline sim::SimConfig config_from_env(const std::map<std::string, std::string>& env) {
  return sim::SimConfig::from_env([&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

// The bytes of a sim allocation, read back with a synchronous copy.
inline std::vector<unsigned char> read_back(const void* device_ptr, size_t nbytes, int device) {
  std::vector<unsigned char> out(nbytes);
  get_backend(DeviceType::Sim)
      .memcpy(device, out.data(), device_ptr, nbytes, CopyKind::DeviceToHost);
  return out;
}

}  // namespace ferry::testing
