// Shared helpers for the device tests: a fixture that puts the sim device into a known state (the
// documented defaults, whatever FERRY_SIM_* says) and RAII holders for sim and pinned memory.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "ferry/backends/sim/sim.h"
#include "ferry/core/error.h"
#include "ferry/device/backend.h"
#include "ferry/device/runtime.h"

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

// The bytes of a sim allocation, read back with a synchronous copy.
inline std::vector<unsigned char> read_back(const void* device_ptr, size_t nbytes, int device) {
  std::vector<unsigned char> out(nbytes);
  get_backend(DeviceType::Sim)
      .memcpy(device, out.data(), device_ptr, nbytes, CopyKind::DeviceToHost);
  return out;
}

}  // namespace ferry::testing
