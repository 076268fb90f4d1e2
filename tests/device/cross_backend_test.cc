// Two device runtimes in one process: the sim and a second runtime (FakeBackend standing in for
// CUDA, or the real CUDA backend on a machine with a GPU). wait_stream and Event::block work for
// every combination of device types (the host synchronizes the source when the runtimes differ,
// as torchgpipe's wait_stream does for the CPU), and host memory page-locked by one runtime counts
// as pinned for the other's asynchronous copies.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "ferry/device/event.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"
#include "tests/device/fake_backend.h"
#include "tests/device/sim_fixture.h"

namespace ferry::testing {
namespace {

using std::chrono::milliseconds;

class CrossBackendTest : public SimTest {
 protected:
  void SetUp() override {
    if (ScopedFakeCuda::real_cuda_present()) {
      GTEST_SKIP() << "a real CUDA device is present; the fake would shadow it";
    }
    SimTest::SetUp();
  }
};

TEST_F(CrossBackendTest, WaitStreamAcrossDeviceTypesSynchronizesTheSource) {
  ScopedFakeCuda fake_cuda;  // first: outlives every stream and event below
  FakeBackend& fake = fake_backend();
  const Device cuda("cuda:0");
  ASSERT_EQ(device_count(DeviceType::CUDA), 1);
  const Stream other = get_stream_from_pool(cuda);
  const Stream sim = get_stream_from_pool(Device("sim:0"));

  // sim <- other runtime: the host synchronizes the source, so work queued on the sim stream
  // afterwards sees the source's work done.
  bool source_ran = false;
  enqueue_host_function(other, [&] { source_ran = true; });
  const int syncs = fake.synchronizations();
  wait_stream(sim, other);
  EXPECT_TRUE(source_ran);
  EXPECT_EQ(fake.synchronizations(), syncs + 1);
  bool seen_on_sim = false;
  enqueue_host_function(sim, [&] { seen_on_sim = source_ran; });
  sim.synchronize();
  EXPECT_TRUE(seen_on_sim);

  // other runtime <- sim: the host synchronizes the sim stream.
  std::atomic<bool> sim_work_done{false};
  enqueue_host_function(sim, [&] {
    std::this_thread::sleep_for(milliseconds(20));
    sim_work_done = true;
  });
  wait_stream(other, sim);
  EXPECT_TRUE(sim_work_done.load());
  EXPECT_TRUE(sim.query());

  // Both with the CPU, and the method spelling.
  source_ran = false;
  enqueue_host_function(other, [&] { source_ran = true; });
  wait_stream(Stream(), other);
  EXPECT_TRUE(source_ran);
  wait_stream(other, Stream());
  source_ran = false;
  enqueue_host_function(other, [&] { source_ran = true; });
  sim.wait_stream(other);
  EXPECT_TRUE(source_ran);
}

TEST_F(CrossBackendTest, EventBlockAcrossDeviceTypesWaitsOnTheHost) {
  ScopedFakeCuda fake_cuda;
  const Stream other = get_stream_from_pool(Device("cuda:0"));
  const Stream sim = get_stream_from_pool(Device("sim:0"));
  {
    bool marked_work_ran = false;
    bool later_work_ran = false;
    enqueue_host_function(other, [&] { marked_work_ran = true; });
    Event e;
    e.record(other);
    enqueue_host_function(other, [&] { later_work_ran = true; });
    EXPECT_FALSE(e.query());
    e.block(sim);  // no throw: the host waits for the event
    EXPECT_TRUE(marked_work_ran);
    EXPECT_FALSE(later_work_ran) << "only the work before the record is waited for";
    EXPECT_TRUE(e.query());
    other.synchronize();
  }
  {
    std::atomic<bool> sim_work_done{false};
    enqueue_host_function(sim, [&] {
      std::this_thread::sleep_for(milliseconds(20));
      sim_work_done = true;
    });
    Event e;
    e.record(sim);
    e.block(other);
    EXPECT_TRUE(sim_work_done.load());
    EXPECT_EQ(e.device(), Device("sim:0"));
  }
}

TEST_F(CrossBackendTest, MemoryPinnedByAnotherRuntimeIsPinnedForSimCopies) {
  constexpr size_t n = 1 << 16;
  ScopedFakeCuda fake_cuda;
  auto* pinned = static_cast<unsigned char*>(pinned_malloc(DeviceType::CUDA, n));
  ASSERT_NE(pinned, nullptr);
  EXPECT_TRUE(is_pinned(pinned, n));
  EXPECT_TRUE(is_pinned(pinned + 100, n - 100));
  EXPECT_FALSE(is_pinned(pinned + 100, n));
  EXPECT_FALSE(sim_backend().is_pinned(pinned)) << "the sim did not pin it";
  std::fill(pinned, pinned + n, 0x5C);

  Backend& b = sim_backend();
  const Stream s = get_stream_from_pool(Device("sim:0"));
  SimBuffer x(0, n);
  std::vector<unsigned char> pageable(n, 0x6D);
  {
    Gate gate;
    enqueue_host_function(s, gate.blocker());
    // Pinned: the copy only enqueues, so it returns while the stream is still held.
    b.memcpy_async(0, x.get(), pinned, n, CopyKind::HostToDevice, s.raw());
    EXPECT_FALSE(s.query());
    EXPECT_EQ(sim::pending_operations(0, s.raw()), 2u);
    gate.open();
    s.synchronize();
    EXPECT_FALSE(gate.timed_out()) << "the copy from CUDA-pinned memory waited for the stream";
  }
  EXPECT_EQ(read_back(x.get(), n, 0), std::vector<unsigned char>(n, 0x5C));
  {
    // The control: pageable memory makes the same call wait for the stream.
    Gate gate;
    enqueue_host_function(s, gate.blocker());
    std::atomic<bool> opened{false};
    std::thread opener([&] {
      std::this_thread::sleep_for(milliseconds(30));
      opened = true;
      gate.open();
    });
    b.memcpy_async(0, x.get(), pageable.data(), n, CopyKind::HostToDevice, s.raw());
    EXPECT_TRUE(opened.load()) << "a pageable copy returned before the stream reached it";
    opener.join();
  }
  EXPECT_EQ(read_back(x.get(), n, 0), pageable);
  pinned_free(DeviceType::CUDA, pinned);
  EXPECT_FALSE(is_pinned(pinned));
}

TEST(RealCudaPinnedTest, CudaPinnedMemoryIsPinnedForSimCopies) {
  if (device_count(DeviceType::CUDA) == 0) GTEST_SKIP() << "no CUDA device";
  sim::configure(sim::SimConfig{});
  constexpr size_t n = 1 << 16;
  auto* pinned = static_cast<unsigned char*>(pinned_malloc(DeviceType::CUDA, n));
  EXPECT_TRUE(is_pinned(pinned, n));
  Backend& b = get_backend(DeviceType::Sim);
  const Stream s = get_stream_from_pool(Device("sim:0"));
  void* x = b.malloc(0, n);
  {
    Gate gate;
    enqueue_host_function(s, gate.blocker());
    b.memcpy_async(0, x, pinned, n, CopyKind::HostToDevice, s.raw());
    EXPECT_FALSE(s.query()) << "the copy from CUDA-pinned memory waited for the stream";
    gate.open();
    s.synchronize();
  }
  b.free(0, x);
  pinned_free(DeviceType::CUDA, pinned);
}

}  // namespace
}  // namespace ferry::testing
