// Sim device memory: the double mapping, translation, copies in every direction, range and
// device checks, out-of-memory errors, pinned memory, peer access and the raw allocator.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "ferry/backends/cpu/copy_tuning.h"
#include "ferry/core/storage.h"
#include "ferry/device/raw_device_allocator.h"
#include "ferry/device/stream.h"
#include "tests/device/sim_fixture.h"
#include "tests/support/errors.h"
#include "tests/support/random.h"

namespace ferry::testing {
namespace {

using SimMemoryTest = SimTest;

std::vector<unsigned char> iota_bytes(size_t n, unsigned char first = 0) {
  std::vector<unsigned char> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST_F(SimMemoryTest, CopiesRoundTripInEveryDirection) {
  constexpr size_t n = 3 * 4096 + 123;  // not a whole number of pages
  Backend& b = sim_backend();
  SimBuffer x(0, n), y(0, n), z(1, n);
  const auto pattern = iota_bytes(n, 5);
  b.memcpy(0, x.get(), pattern.data(), n, CopyKind::HostToDevice);  // pageable
  b.memcpy(0, y.get(), x.get(), n, CopyKind::DeviceToDevice);
  const Stream s = get_stream_from_pool(Device("sim:0"));
  b.memcpy_peer_async(z.get(), 1, y.get(), 0, n, 0, s.raw());
  s.synchronize();
  EXPECT_EQ(read_back(z.get(), n, 1), pattern);

  PinnedBuffer pinned(n);  // pinned: truly asynchronous
  const Stream s1 = get_stream_from_pool(Device("sim:1"));
  b.memcpy_async(1, pinned.get(), z.get(), n, CopyKind::DeviceToHost, s1.raw());
  s1.synchronize();
  EXPECT_EQ(std::memcmp(pinned.get(), pattern.data(), n), 0);

  b.memset(1, z.get(), 0xAB, n);
  EXPECT_EQ(read_back(z.get(), n, 1), std::vector<unsigned char>(n, 0xAB));
  // Zero-byte operations are no-ops, whatever the pointers.
  b.memcpy_async(0, nullptr, nullptr, 0, CopyKind::HostToDevice, s.raw());
}

// Copies at least the CPU engine's streaming threshold long go through its streaming copy
// (sim_access.h): every byte lands, from and to addresses off their lines, in every direction.
TEST_F(SimMemoryTest, CopiesLongEnoughToStreamKeepEveryByte) {
  SCOPED_TRACE(seed_trace());
  const int64_t threshold = cpu::tuning::stream_thresholds().sequential;
  if (threshold > (int64_t{256} << 20)) GTEST_SKIP() << "no streaming below 256 MiB here";
  const size_t n = static_cast<size_t>(threshold) + 4096 + 77;
  std::vector<unsigned char> pattern(n + 3);
  auto rng = test_rng();
  for (auto& byte : pattern) byte = static_cast<unsigned char>(rng());
  Backend& b = sim_backend();
  SimBuffer x(0, n + 64), y(0, n + 64), z(1, n + 64);
  auto* xd = static_cast<unsigned char*>(x.get()) + 5;  // dst and src off their 64-byte lines
  auto* yd = static_cast<unsigned char*>(y.get()) + 33;
  auto* zd = static_cast<unsigned char*>(z.get()) + 1;
  b.memcpy(0, xd, pattern.data() + 3, n, CopyKind::HostToDevice);  // pageable
  b.memcpy(0, yd, xd, n, CopyKind::DeviceToDevice);
  const Stream s = get_stream_from_pool(Device("sim:0"));
  b.memcpy_peer_async(zd, 1, yd, 0, n, 0, s.raw());
  s.synchronize();
  PinnedBuffer pinned(n + 8);
  const Stream s1 = get_stream_from_pool(Device("sim:1"));
  b.memcpy_async(1, static_cast<unsigned char*>(pinned.get()) + 7, zd, n, CopyKind::DeviceToHost,
                 s1.raw());
  s1.synchronize();
  EXPECT_EQ(std::memcmp(static_cast<unsigned char*>(pinned.get()) + 7, pattern.data() + 3, n), 0);
}

TEST_F(SimMemoryTest, HostAddressTranslatesInteriorPointers) {
  SimBuffer x(1, 10000);
  const auto pattern = iota_bytes(10000);
  sim_backend().memcpy(1, x.get(), pattern.data(), pattern.size(), CopyKind::HostToDevice);
  auto* base = static_cast<unsigned char*>(sim::host_address(x.get()));
  EXPECT_NE(static_cast<void*>(base), x.get());  // a different mapping of the same bytes
  EXPECT_EQ(base[0], 0);
  auto* interior =
      static_cast<unsigned char*>(sim::host_address(static_cast<unsigned char*>(x.get()) + 4321));
  EXPECT_EQ(interior, base + 4321);
  EXPECT_EQ(*interior, static_cast<unsigned char>(4321 % 256));

  int on_host = 0;
  const std::string message = error_of([&] { sim::host_address(&on_host); });
  EXPECT_NE(message.find("expected an address inside a live sim allocation"), std::string::npos)
      << message;
}

TEST_F(SimMemoryTest, DereferencingADevicePointerDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // The device address is mapped PROT_NONE: the kernel kills the reader with SIGSEGV. A sanitizer
  // would catch the signal and exit with its own status, so the child restores the default
  // action first; any other death (an exception, an abort) fails the test.
  EXPECT_EXIT(
      {
        void* ptr = get_backend(DeviceType::Sim).malloc(0, 4096);
        std::signal(SIGSEGV, SIG_DFL);
        volatile unsigned char value = *static_cast<volatile unsigned char*>(ptr);
        (void)value;
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
  // Interior addresses and writes fault the same way.
  EXPECT_EXIT(
      {
        auto* ptr = static_cast<unsigned char*>(get_backend(DeviceType::Sim).malloc(1, 10000));
        std::signal(SIGSEGV, SIG_DFL);
        *static_cast<volatile unsigned char*>(ptr + 9000) = 1;
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
}

TEST_F(SimMemoryTest, CopiesAreCheckedAgainstAllocationsAndDevices) {
  Backend& b = sim_backend();
  SimBuffer x(0, 1000), other(1, 1000);
  std::vector<unsigned char> host(2000);
  const Stream s = get_stream_from_pool(Device("sim:0"));

  std::string message = error_of(
      [&] { b.memcpy_async(0, x.get(), host.data(), 1001, CopyKind::HostToDevice, s.raw()); });
  EXPECT_NE(message.find("sim:0: memcpy_async"), std::string::npos) << message;
  EXPECT_NE(message.find("1001 bytes inside one allocation"), std::string::npos) << message;

  message = error_of(
      [&] { b.memcpy_async(0, other.get(), host.data(), 10, CopyKind::HostToDevice, s.raw()); });
  EXPECT_NE(message.find("memory of sim:1"), std::string::npos) << message;

  message = error_of(
      [&] { b.memcpy_async(0, x.get(), other.get(), 10, CopyKind::HostToDevice, s.raw()); });
  EXPECT_NE(message.find("host source"), std::string::npos) << message;

  message = error_of(
      [&] { b.memcpy_async(0, host.data(), x.get(), 10, CopyKind::HostToDevice, s.raw()); });
  EXPECT_NE(message.find("(host memory)"), std::string::npos) << message;

  // Device-to-device across devices needs peer access (or memcpy_peer_async).
  message = error_of(
      [&] { b.memcpy_async(0, x.get(), other.get(), 10, CopyKind::DeviceToDevice, s.raw()); });
  EXPECT_NE(message.find("peers with access enabled"), std::string::npos) << message;
  ASSERT_TRUE(enable_peer_access(Device("sim:0"), Device("sim:1")));
  EXPECT_TRUE(peer_access_enabled(Device("sim:0"), Device("sim:1")));
  b.memcpy_async(0, x.get(), other.get(), 10, CopyKind::DeviceToDevice, s.raw());
  s.synchronize();

  // A stream of another device.
  const Stream s1 = get_stream_from_pool(Device("sim:1"));
  message = error_of([&] { b.memset_async(0, x.get(), 0, 10, s1.raw()); });
  EXPECT_NE(message.find("expected a stream of sim:0"), std::string::npos) << message;

  message = error_of([&] { b.free(0, static_cast<char*>(x.get()) + 8); });
  EXPECT_NE(message.find("expected the start of a live sim allocation"), std::string::npos)
      << message;
}

TEST_F(SimMemoryTest, FreeWaitsForQueuedWork) {
  Backend& b = sim_backend();
  PinnedBuffer out(4096);
  const Stream s = get_stream_from_pool(Device("sim:0"));
  void* x = b.malloc(0, 4096);
  b.memset(0, x, 0x42, 4096);
  enqueue_host_function(s, [] { std::this_thread::sleep_for(std::chrono::milliseconds(30)); });
  b.memcpy_async(0, out.get(), x, 4096, CopyKind::DeviceToHost, s.raw());
  b.free(0, x);  // must not unmap under the queued copy
  EXPECT_TRUE(s.query());
  EXPECT_TRUE(out.all_equal(0x42));
}

class SimSmallMemoryTest : public SimTest {
 protected:
  sim::SimConfig config() const override {
    sim::SimConfig c;
    c.memory = size_t{1} << 20;
    return c;
  }
};

TEST_F(SimSmallMemoryTest, OutOfMemorySaysWhatWasAskedAndWhatIsFree) {
  Backend& b = sim_backend();
  SimBuffer held(0, 768 * 1024);
  EXPECT_EQ(memory_info(Device("sim:0")).total, size_t{1} << 20);
  EXPECT_EQ(memory_info(Device("sim:0")).free, size_t{256} * 1024);
  EXPECT_EQ(memory_info(Device("sim:1")).free, size_t{1} << 20);  // per device
  std::string message;
  try {
    b.malloc(0, 512 * 1024);
  } catch (const OutOfMemoryError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("sim:0: malloc(524288 bytes) failed: out of memory"), std::string::npos)
      << message;
  EXPECT_NE(message.find("FERRY_SIM_MEMORY"), std::string::npos) << message;
  SimBuffer fits(0, 256 * 1024);
  EXPECT_EQ(memory_info(Device("sim:0")).free, 0u);
}

TEST_F(SimMemoryTest, PinnedMemoryIsTrackedByRange) {
  PinnedBuffer pinned(10000);
  EXPECT_TRUE(is_pinned(pinned.get()));
  EXPECT_TRUE(is_pinned(pinned.get() + 9999));
  // Ranges: inside the block (the request rounded up to whole pages) or not.
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t block = (10000 + page - 1) / page * page;
  EXPECT_TRUE(is_pinned(pinned.get(), 10000));
  EXPECT_TRUE(is_pinned(pinned.get() + 100, block - 100));
  EXPECT_FALSE(is_pinned(pinned.get() + 100, block - 99));
  EXPECT_TRUE(sim_backend().is_pinned_range(pinned.get(), block));
  EXPECT_FALSE(sim_backend().is_pinned_range(pinned.get(), block + 1));
  std::vector<char> pageable(100);
  EXPECT_FALSE(is_pinned(pageable.data()));
  EXPECT_FALSE(is_pinned(nullptr));
  void* raw = pinned_malloc(DeviceType::Sim, 64);
  EXPECT_TRUE(sim_backend().is_pinned(raw));
  pinned_free(DeviceType::Sim, raw);
  EXPECT_FALSE(sim_backend().is_pinned(raw));
  EXPECT_THROW(pinned_free(DeviceType::Sim, pageable.data()), DeviceError);
}

class SimPeerMatrixTest : public SimTest {
 protected:
  sim::SimConfig config() const override {
    sim::SimConfig c;
    c.devices = 3;
    c.peer_mode = sim::SimConfig::PeerMode::kMatrix;
    c.peer_matrix = {{true, true, false}, {false, true, false}, {true, true, true}};
    return c;
  }
};

TEST_F(SimPeerMatrixTest, PeerAccessFollowsTheMatrix) {
  EXPECT_EQ(device_count(DeviceType::Sim), 3);
  EXPECT_TRUE(can_access_peer(Device("sim:0"), Device("sim:1")));
  EXPECT_FALSE(can_access_peer(Device("sim:1"), Device("sim:0")));
  EXPECT_FALSE(can_access_peer(Device("sim:0"), Device("sim:2")));
  EXPECT_TRUE(can_access_peer(Device("sim:2"), Device("sim:0")));
  EXPECT_TRUE(can_access_peer(Device("sim:1"), Device("sim:1")));
  EXPECT_FALSE(enable_peer_access(Device("sim:1"), Device("sim:0")));
  EXPECT_THROW(sim_backend().enable_peer_access(1, 0), DeviceError);
  EXPECT_TRUE(enable_peer_access(Device("sim:0"), Device("sim:1")));

  // Without peer access a peer copy still works (staged by the runtime).
  SimBuffer a(1, 256), c(0, 256);
  sim_backend().memset(1, a.get(), 0x31, 256);
  const Stream s = get_stream_from_pool(Device("sim:1"));
  sim_backend().memcpy_peer_async(c.get(), 0, a.get(), 1, 256, 1, s.raw());
  s.synchronize();
  EXPECT_EQ(read_back(c.get(), 256, 0), std::vector<unsigned char>(256, 0x31));
}

TEST_F(SimMemoryTest, RawAllocatorBacksStorageOnSimDevices) {
  // Some allocator is installed for sim tensors (ferry/memory may have replaced the raw one).
  EXPECT_NE(get_allocator(DeviceType::Sim), nullptr);
  Allocator* allocator = raw_device_allocator(DeviceType::Sim);
  const size_t before = memory_info(Device("sim:1")).free;
  {
    Storage storage(1 << 20, allocator, Device("sim:1"));
    EXPECT_EQ(storage.device(), Device("sim:1"));
    EXPECT_NE(sim::host_address(storage.data()), nullptr);
    EXPECT_EQ(memory_info(Device("sim:1")).free, before - (1 << 20));
    Storage empty(0, allocator, Device("sim:1"));
    EXPECT_EQ(empty.data(), nullptr);
  }
  EXPECT_EQ(memory_info(Device("sim:1")).free, before);
  EXPECT_THROW(Storage(16, allocator, Device("sim:7")), DeviceError);
}

TEST_F(SimMemoryTest, ReconfiguringTheTopologyNeedsNoLiveAllocations) {
  SimBuffer held(0, 4096);
  sim::SimConfig c;
  c.devices = 3;
  const std::string message = error_of([&] { sim::configure(c); });
  EXPECT_NE(message.find("no live sim allocations"), std::string::npos) << message;
  EXPECT_EQ(device_count(DeviceType::Sim), 2);
  // Settings that do not change the topology may change at any time.
  sim::SimConfig slow;
  slow.latency[0] = std::chrono::microseconds(10);
  sim::configure(slow);
  EXPECT_EQ(sim::config().latency[0], std::chrono::microseconds(10));
}

}  // namespace
}  // namespace ferry::testing
