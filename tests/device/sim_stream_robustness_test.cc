// Sim streams under concurrent use and misuse: a pageable copy takes its turn in the stream's
// queue like any other operation (also when other threads queue work at the same time);
// destroying a stream twice, or from two threads at once, is safe; errors name the backend call
// and the device.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "ferry/device/stream.h"
#include "tests/device/sim_fixture.h"
#include "tests/support/errors.h"

namespace ferry::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Polls until `stream` of sim:`device` has `n` operations queued and unfinished (10 s at most).
bool wait_for_pending(int device, RawStream stream, uint64_t n) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (sim::pending_operations(device, stream) < n) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return sim::pending_operations(device, stream) == n;
}

using SimStreamRobustnessTest = SimTest;

TEST_F(SimStreamRobustnessTest, PageableCopyTakesItsTurnInTheQueue) {
  constexpr size_t n = 1 << 16;
  Backend& b = sim_backend();
  const Stream s = get_stream_from_pool(Device("sim:0"));
  SimBuffer x(0, n);
  std::vector<unsigned char> pageable(n, 1);
  Gate gate;
  enqueue_host_function(s, gate.blocker());
  std::atomic<bool> returned{false};
  std::thread copier([&] {
    b.memcpy_async(0, x.get(), pageable.data(), n, CopyKind::HostToDevice, s.raw());
    returned = true;
  });
  // The copy is queued behind the gate (not run by the calling thread once the queue drains).
  EXPECT_TRUE(wait_for_pending(0, s.raw(), 2)) << "the pageable copy never reached the queue";
  EXPECT_FALSE(returned.load()) << "a pageable copy returns only once it is done";
  // Queued after the copy by another thread: must run after it.
  b.memset_async(0, x.get(), 2, n, s.raw());
  gate.open();
  copier.join();
  EXPECT_TRUE(returned.load());
  s.synchronize();
  EXPECT_FALSE(gate.timed_out());
  EXPECT_EQ(read_back(x.get(), n, 0), std::vector<unsigned char>(n, 2));
}

TEST_F(SimStreamRobustnessTest, ConcurrentPageableCopiesAreSerializedWithTheStream) {
  // One thread writes 1, 2, 3, ... with pageable copies while another reads with pageable
  // copies, both on one stream: every read sees one whole value, never less than the one before.
  constexpr size_t n = 1 << 16;
  constexpr int kWrites = 60;
  Backend& b = sim_backend();
  const Stream s = get_stream_from_pool(Device("sim:1"));
  SimBuffer x(1, n);
  b.memset(1, x.get(), 0, n);
  std::atomic<bool> writing{true};
  std::thread writer([&] {
    std::vector<unsigned char> value(n);
    for (int i = 1; i <= kWrites; ++i) {
      std::fill(value.begin(), value.end(), static_cast<unsigned char>(i));
      b.memcpy_async(1, x.get(), value.data(), n, CopyKind::HostToDevice, s.raw());
    }
    writing = false;
  });
  std::vector<unsigned char> seen(n);
  int last = 0;
  int reads = 0;
  bool torn = false;
  bool backwards = false;
  while (writing.load() || reads == 0) {
    b.memcpy_async(1, seen.data(), x.get(), n, CopyKind::DeviceToHost, s.raw());
    ++reads;
    const int first = seen[0];
    for (unsigned char v : seen) torn = torn || v != first;
    backwards = backwards || first < last;
    last = first;
  }
  writer.join();
  EXPECT_FALSE(torn) << "a read overlapped a write";
  EXPECT_FALSE(backwards) << "a read saw an older value than the read before it";
  EXPECT_EQ(read_back(x.get(), n, 1), std::vector<unsigned char>(n, kWrites));
}

TEST_F(SimStreamRobustnessTest, DestroyedStreamErrorsNameTheCall) {
  Backend& b = sim_backend();
  SimBuffer x(1, 4096);
  RawStream s = b.stream_create(1);
  b.stream_destroy(1, s);
  b.stream_destroy(1, s);  // a second destroy is harmless
  EXPECT_TRUE(b.stream_query(1, s));
  std::string message = error_of<DeviceError>([&] { b.memset_async(1, x.get(), 0, 16, s); });
  EXPECT_NE(message.find("sim:1: memset_async: expected a live stream, but stream "),
            std::string::npos)
      << message;
  EXPECT_NE(message.find(" was destroyed"), std::string::npos) << message;
  message = error_of<DeviceError>([&] { b.launch_host_func(1, s, [] {}); });
  EXPECT_NE(message.find("sim:1: launch_host_func: expected a live stream"), std::string::npos)
      << message;
  RawEvent timing = b.event_create(1, true);
  message = error_of<DeviceError>([&] { b.event_record(1, timing, s); });
  EXPECT_NE(message.find("sim:1: event_record: expected a live stream"), std::string::npos)
      << message;
  b.event_destroy(1, timing);

  // The default stream is never destroyed: synchronous copies keep working.
  b.stream_destroy(1, b.default_stream(1));
  b.memset(1, x.get(), 0x44, 4096);
  EXPECT_EQ(read_back(x.get(), 4096, 1), std::vector<unsigned char>(4096, 0x44));
}

TEST_F(SimStreamRobustnessTest, ConcurrentDestroysBothWaitForTheWork) {
  Backend& b = sim_backend();
  RawStream s = b.stream_create(0);
  Gate gate;
  std::atomic<bool> work_done{false};
  b.launch_host_func(0, s, gate.blocker());
  b.launch_host_func(0, s, [&] { work_done = true; });
  std::atomic<int> returned{0};
  std::atomic<int> saw_work_done{0};
  std::vector<std::thread> destroyers;
  for (int i = 0; i < 2; ++i) {
    destroyers.emplace_back([&] {
      b.stream_destroy(0, s);
      saw_work_done += work_done.load() ? 1 : 0;
      ++returned;
    });
  }
  // Give both threads time to enter stream_destroy (not needed for the checks to hold).
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(returned.load(), 0) << "stream_destroy returned before the queued work ran";
  gate.open();
  for (auto& t : destroyers) t.join();
  EXPECT_EQ(returned.load(), 2);
  EXPECT_EQ(saw_work_done.load(), 2) << "each destroy returns only once the queue is drained";
  EXPECT_FALSE(gate.timed_out());
}

class SimHugeMemoryTest : public SimTest {
 protected:
  sim::SimConfig config() const override {
    sim::SimConfig c;
    c.memory = size_t{1} << 50;  // lets a request through to mmap, which cannot map it
    return c;
  }
};

TEST_F(SimHugeMemoryTest, MappingFailureNamesTheCallAndTheDevice) {
  const size_t huge = size_t{1} << 48;  // more than a 47-bit user address space
  const std::string message = error_of<OutOfMemoryError>([&] { sim_backend().malloc(1, huge); });
  EXPECT_NE(message.find("sim:1: malloc(" + std::to_string(huge) + " bytes): "), std::string::npos)
      << message;
  EXPECT_NE(message.find("failed"), std::string::npos) << message;
  EXPECT_EQ(memory_info(Device("sim:1")).free, size_t{1} << 50) << "nothing stays allocated";
}

}  // namespace
}  // namespace ferry::testing
