// Host-memory registration (register_host / unregister_host), memory_range, and ipc_close
// waiting for queued work, on the sim.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ferry/device/ipc.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"
#include "tests/device/sim_fixture.h"
#include "tests/support/errors.h"
#include "tests/support/random.h"

namespace ferry::testing {
namespace {

using namespace std::chrono_literals;
using HostRegistrationTest = SimTest;
using MemoryRangeTest = SimTest;
using IpcCloseTest = SimTest;

// A memfd mapping ferry did not allocate, unmapped at scope end.
class MemfdMapping {
 public:
  explicit MemfdMapping(size_t nbytes) : nbytes_(nbytes) {
    fd_ = ::memfd_create("ferry-test-register", MFD_CLOEXEC);
    if (fd_ >= 0 && ::ftruncate(fd_, static_cast<off_t>(nbytes)) == 0) {
      void* p = ::mmap(nullptr, nbytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
      if (p != MAP_FAILED) ptr_ = static_cast<unsigned char*>(p);
    }
  }
  MemfdMapping(const MemfdMapping&) = delete;
  MemfdMapping& operator=(const MemfdMapping&) = delete;
  ~MemfdMapping() {
    if (ptr_ != nullptr) ::munmap(ptr_, nbytes_);
    if (fd_ >= 0) ::close(fd_);
  }
  unsigned char* get() const { return ptr_; }

 private:
  size_t nbytes_;
  int fd_ = -1;
  unsigned char* ptr_ = nullptr;
};

TEST_F(HostRegistrationTest, RegisteredMemoryIsPinnedAndCopiesFromItOnlyEnqueue) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  constexpr size_t n = 1 << 20;
  MemfdMapping host(n);
  ASSERT_NE(host.get(), nullptr);
  for (size_t i = 0; i < n; ++i) host.get()[i] = static_cast<unsigned char>(rng());
  EXPECT_FALSE(is_pinned(host.get(), n));
  ASSERT_TRUE(register_host(host.get(), n));
  EXPECT_TRUE(is_pinned(host.get(), n));
  EXPECT_TRUE(is_pinned(host.get() + n / 2, n / 2));
  EXPECT_FALSE(is_pinned(host.get() + n / 2, n / 2 + 1)) << "past the registered end";

  // Behind a closed gate, a copy from pinned memory must return at once (pageable memory would
  // make the call wait for the copy, i.e. for the gate, which gives up after 5 s).
  SimBuffer x(0, n);
  const Stream s = get_stream_from_pool(Device("sim:0"));
  Gate gate(5s);
  enqueue_host_function(s, gate.blocker());
  sim_backend().memcpy_async(0, x.get(), host.get(), n, CopyKind::HostToDevice, s.raw());
  EXPECT_EQ(sim::pending_operations(0, s.raw()), 2u) << "the copy did not just enqueue";
  // And back, into registered memory too.
  MemfdMapping back(n);
  ASSERT_NE(back.get(), nullptr);
  ASSERT_TRUE(register_host(back.get(), n));
  sim_backend().memcpy_async(0, back.get(), x.get(), n, CopyKind::DeviceToHost, s.raw());
  EXPECT_EQ(sim::pending_operations(0, s.raw()), 3u);
  gate.open();
  s.synchronize();
  EXPECT_FALSE(gate.timed_out()) << "a copy blocked the host: it took the pageable path";
  EXPECT_EQ(std::memcmp(back.get(), host.get(), n), 0);

  unregister_host(back.get());
  unregister_host(host.get());
  EXPECT_FALSE(is_pinned(host.get(), 1));
  EXPECT_FALSE(is_pinned(back.get(), 1));
}

// Registration faults every page of the range into this process, as a driver's pinning does, so
// that the first copy from it pays no first access per page (costly on virtual machines).
TEST_F(HostRegistrationTest, RegistrationFaultsEveryPageIn) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  constexpr size_t kPages = 64;
  MemfdMapping host(kPages * page);
  ASSERT_NE(host.get(), nullptr);
  const auto resident_pages = [&] {
    std::vector<unsigned char> in_core(kPages);
    EXPECT_EQ(::mincore(host.get(), kPages * page, in_core.data()), 0);
    return std::count_if(in_core.begin(), in_core.end(), [](unsigned char c) { return c & 1; });
  };
  ASSERT_EQ(resident_pages(), 0) << "a fresh memfd mapping has no page in memory";
  ASSERT_TRUE(register_host(host.get(), kPages * page));
  EXPECT_EQ(resident_pages(), static_cast<std::ptrdiff_t>(kPages));
  unregister_host(host.get());
}

TEST_F(HostRegistrationTest, OverlapsDoubleRegistrationAndStrangersAreErrors) {
  constexpr size_t n = 16 * 4096;
  MemfdMapping host(n);
  ASSERT_NE(host.get(), nullptr);
  ASSERT_TRUE(register_host(host.get() + 4096, 4 * 4096));
  std::string message = error_of<DeviceError>([&] { register_host(host.get() + 4096, 4 * 4096); });
  EXPECT_NE(message.find("expected memory not pinned yet, but the range overlaps the registered "
                         "range"),
            std::string::npos)
      << message;
  message = error_of<DeviceError>([&] { register_host(host.get(), 4096 + 1); });
  EXPECT_NE(message.find("overlaps the registered range"), std::string::npos) << message;
  message = error_of<DeviceError>([&] { register_host(host.get() + 4 * 4096, 4096); });
  EXPECT_NE(message.find("overlaps the registered range"), std::string::npos) << message;
  // Touching ranges are fine.
  ASSERT_TRUE(register_host(host.get(), 4096));
  ASSERT_TRUE(register_host(host.get() + 5 * 4096, 4096));

  message = error_of<DeviceError>([&] { unregister_host(host.get() + 2 * 4096); });
  EXPECT_NE(message.find("host_unregister: expected the start of a range registered with "
                         "host_register"),
            std::string::npos)
      << message;
  void* block = pinned_malloc(DeviceType::Sim, 4096);
  message = error_of<DeviceError>([&] { unregister_host(block); });
  EXPECT_NE(message.find("a malloc_host block (free it with free_host)"), std::string::npos)
      << message;
  message = error_of<DeviceError>([&] { register_host(block, 100); });
  EXPECT_NE(message.find("overlaps the malloc_host block"), std::string::npos) << message;
  pinned_free(DeviceType::Sim, block);
  message = error_of<DeviceError>([&] { pinned_free(DeviceType::Sim, host.get()); });
  EXPECT_NE(message.find("unregister it with host_unregister"), std::string::npos) << message;

  message = error_of<DeviceError>([&] { register_host(nullptr, 10); });
  EXPECT_NE(message.find("expected a non-empty range of host memory, but got a null pointer"),
            std::string::npos)
      << message;
  message = error_of<DeviceError>([&] { register_host(host.get() + 8 * 4096, 0); });
  EXPECT_NE(message.find("expected a non-empty range"), std::string::npos) << message;
  SimBuffer device_memory(0, 4096);
  message = error_of<DeviceError>([&] { register_host(device_memory.get(), 4096); });
  EXPECT_NE(message.find("expected host memory, but the range overlaps sim:0 device memory"),
            std::string::npos)
      << message;
  void* gone = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(gone, MAP_FAILED);
  ::munmap(gone, 4096);
  message = error_of<DeviceError>([&] { register_host(gone, 4096); });
  EXPECT_NE(message.find("expected mapped host memory"), std::string::npos) << message;

  unregister_host(host.get());
  unregister_host(host.get() + 4096);
  unregister_host(host.get() + 5 * 4096);
  message = error_of<DeviceError>([&] { unregister_host(host.get()); });
  EXPECT_NE(message.find("not the start of a registered range"), std::string::npos) << message;
}

TEST_F(MemoryRangeTest, InteriorPointersGiveTheWholeAllocation) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const size_t n = 1000 + rng() % 100000;
  SimBuffer x(1, n);
  auto* base = static_cast<char*>(x.get());
  for (size_t offset : {size_t{0}, size_t{1}, n / 2, n - 1, static_cast<size_t>(rng() % n)}) {
    const MemoryRange r = memory_range(Device("sim:1"), base + offset);
    EXPECT_EQ(r.base, x.get()) << "offset " << offset;
    EXPECT_EQ(r.size, n) << "offset " << offset;
  }
  std::string message = error_of<DeviceError>([&] { memory_range(Device("sim:1"), base + n); });
  EXPECT_NE(message.find("sim:1: memory_range: expected an address inside a live allocation of "
                         "sim:1, but"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("past the end"), std::string::npos) << message;
  int on_the_stack = 0;
  message = error_of<DeviceError>([&] { memory_range(Device("sim:1"), &on_the_stack); });
  EXPECT_NE(message.find("is not inside any sim allocation"), std::string::npos) << message;
  message = error_of<DeviceError>([&] { memory_range(Device("sim:0"), base + 3); });
  EXPECT_NE(message.find("belongs to sim:1"), std::string::npos) << message;
  message = error_of<DeviceError>([&] { memory_range(Device(DeviceType::CPU), base); });
  EXPECT_NE(message.find("expected a device address"), std::string::npos) << message;

  // An imported mapping is an allocation of its own.
  IpcMapping mapping(export_ipc_handle(Device("sim:1"), x.get()));
  const MemoryRange r = memory_range(Device("sim:1"), static_cast<char*>(mapping.get()) + 7);
  EXPECT_EQ(r.base, mapping.get());
  EXPECT_EQ(r.size, n);
}

TEST_F(IpcCloseTest, ClosingAMappingWaitsForQueuedWorkOnIt) {
  constexpr size_t n = 1 << 16;
  SimBuffer x(0, n);
  sim_backend().memset(0, x.get(), 0, n);
  PinnedBuffer pattern(n);
  std::memset(pattern.get(), 0x6B, n);
  const Stream s = get_stream_from_pool(Device("sim:0"));
  std::atomic<bool> closed{false};
  std::thread closer;
  {
    IpcMapping mapping(export_ipc_handle(Device("sim:0"), x.get()));
    Gate gate(10s);
    enqueue_host_function(s, gate.blocker());
    sim_backend().memcpy_async(0, mapping.get(), pattern.get(), n, CopyKind::HostToDevice, s.raw());
    closer = std::thread([&] {
      mapping.reset();
      closed = true;
    });
    std::this_thread::sleep_for(100ms);
    EXPECT_FALSE(closed.load()) << "ipc_close returned while a copy into the mapping was queued";
    gate.open();
    closer.join();
    EXPECT_TRUE(closed.load());
    EXPECT_FALSE(gate.timed_out());
  }
  EXPECT_EQ(read_back(x.get(), n, 0), std::vector<unsigned char>(n, 0x6B));
}

}  // namespace
}  // namespace ferry::testing
