// The IPC channel and sharing sim memory between processes. The cross-process test re-executes
// this test binary (never fork() with live worker threads) with FERRY_TEST_IPC_CHILD set, so the
// same test body plays the child.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ferry/device/ipc.h"
#include "ferry/device/stream.h"
#include "tests/device/sim_fixture.h"
#include "tests/support/errors.h"

extern char** environ;

namespace ferry::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kChildVariable = "FERRY_TEST_IPC_CHILD";

std::string unique_name(const char* what) {
  static std::atomic<int> counter{0};
  return std::string("@ferry-test-") + what + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(counter.fetch_add(1));
}

TEST(IpcChannelTest, BytesAndValuesRoundTrip) {
  auto [a, b] = IpcConnection::pair();
  std::vector<std::byte> big(3 << 20);  // larger than a socket buffer: partial writes happen
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::byte>(i * 7);
  std::thread sender([&, &a = a] {
    a.send_value<uint64_t>(0x1122334455667788ULL);
    a.send_bytes(big);
  });
  EXPECT_EQ(b.receive_value<uint64_t>(), 0x1122334455667788ULL);
  std::vector<std::byte> got(big.size());
  b.receive_bytes(got);
  sender.join();
  EXPECT_EQ(got, big);
}

TEST(IpcChannelTest, PeerHangupAndTimeoutAreClearErrors) {
  auto [a, b] = IpcConnection::pair();
  b.set_timeout(50ms);
  std::string message = error_of<DeviceError>([&, &b = b] { b.receive_value<int>(); });
  EXPECT_NE(message.find("timed out after 50 ms"), std::string::npos) << message;
  a.send_value<uint16_t>(7);
  a.close();
  message = error_of<DeviceError>([&, &b = b] { b.receive_value<uint64_t>(); });
  EXPECT_NE(message.find("closed the connection after 2 of 8 bytes"), std::string::npos) << message;
  // Writing to a closed peer raises (no SIGPIPE).
  auto [c, d] = IpcConnection::pair();
  d.close();
  message = error_of<DeviceError>([&, &c = c] {
    for (int i = 0; i < 100; ++i) c.send_value<int>(i);
  });
  EXPECT_NE(message.find("ipc: send failed"), std::string::npos) << message;
}

TEST(IpcChannelTest, ListenerAndConnectOnAbstractAndFilePaths) {
  const std::string file_path =
      ::testing::TempDir() + "ferry-ipc-" + std::to_string(::getpid()) + ".sock";
  for (const std::string& path : {unique_name("listen"), file_path}) {
    SCOPED_TRACE(path);
    IpcListener listener(path);
    std::thread client([&] {
      IpcConnection c = IpcConnection::connect(path, 5s);
      c.send_value<int>(42);
      EXPECT_EQ(c.receive_value<int>(), 43);
    });
    IpcConnection server = listener.accept(10s);
    EXPECT_EQ(server.receive_value<int>(), 42);
    server.send_value<int>(43);
    client.join();
  }
  EXPECT_NE(::access(file_path.c_str(), F_OK), 0);  // unlinked by the listener
  const std::string message =
      error_of<DeviceError>([] { IpcConnection::connect("@ferry-nobody-home", 30ms); });
  EXPECT_NE(message.find("connect(\"@ferry-nobody-home\") failed for 30 ms"), std::string::npos)
      << message;
  EXPECT_THROW(IpcListener(std::string(200, 'x')), DeviceError);
}

TEST(IpcChannelTest, HandlesCarryTheirDescriptor) {
  auto [a, b] = IpcConnection::pair();
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  UniqueFd read_end(pipe_fds[0]);
  UniqueFd write_end(pipe_fds[1]);
  IpcHandle handle;
  handle.device = Device("sim:1");
  handle.size = 12345;
  handle.bytes = {std::byte{1}, std::byte{2}, std::byte{3}};
  handle.fd = std::move(write_end);
  a.send_handle(handle);
  IpcHandle got = b.receive_handle();
  EXPECT_EQ(got.device, Device("sim:1"));
  EXPECT_EQ(got.size, 12345u);
  EXPECT_EQ(got.bytes, handle.bytes);
  ASSERT_TRUE(got.fd.valid());
  EXPECT_NE(got.fd.get(), handle.fd.get());
  ASSERT_EQ(::write(got.fd.get(), "hi", 2), 2);  // the received descriptor is the pipe
  char buffer[2];
  ASSERT_EQ(::read(read_end.get(), buffer, 2), 2);
  EXPECT_EQ(std::memcmp(buffer, "hi", 2), 0);

  // Garbage is rejected with a clear message.
  const char junk[32] = "not a handle";
  a.send_bytes(junk, sizeof(junk));
  const std::string message = error_of<DeviceError>([&, &b = b] { b.receive_handle(); });
  EXPECT_NE(message.find("expected a ferry IPC handle"), std::string::npos) << message;
}

using SimIpcTest = SimTest;

TEST_F(SimIpcTest, ImportInTheSameProcessSharesTheBytes) {
  SimBuffer x(1, 5000);
  sim_backend().memset(1, x.get(), 0x11, 5000);
  const IpcHandle handle = export_ipc_handle(Device("sim:1"), x.get());
  EXPECT_EQ(handle.size, 5000u);
  EXPECT_EQ(handle.device, Device("sim:1"));
  EXPECT_TRUE(handle.fd.valid());
  {
    IpcMapping mapping(handle.clone());
    ASSERT_TRUE(mapping);
    EXPECT_NE(mapping.get(), x.get());
    EXPECT_EQ(mapping.size(), 5000u);
    sim_backend().memset(1, static_cast<char*>(mapping.get()) + 100, 0x22, 10);
    EXPECT_EQ(read_back(x.get(), 5000, 1)[105], 0x22);
    EXPECT_EQ(read_back(mapping.get(), 5000, 1)[0], 0x11);
    // Imported memory cannot be exported again or freed as an allocation.
    EXPECT_THROW(export_ipc_handle(Device("sim:1"), mapping.get()), DeviceError);
    EXPECT_THROW(sim_backend().free(1, mapping.get()), DeviceError);
  }
  const std::string message = error_of<DeviceError>(
      [&] { export_ipc_handle(Device("sim:1"), static_cast<char*>(x.get()) + 64); });
  EXPECT_NE(message.find("expected the start of a live sim allocation"), std::string::npos)
      << message;
  IpcHandle bogus = handle.clone();
  bogus.bytes.resize(3);
  EXPECT_THROW(IpcMapping{bogus}, DeviceError);
}

TEST_F(SimIpcTest, MemoryFilesAreSealedAndImportsChecked) {
  SimBuffer x(1, 5000);
  const IpcHandle handle = export_ipc_handle(Device("sim:1"), x.get());
  // Sealed: no process holding the descriptor can shrink the file under our mappings (a worker
  // would die of SIGBUS) or grow it.
  const int seals = ::fcntl(handle.fd.get(), F_GET_SEALS);
  EXPECT_NE(seals & F_SEAL_SHRINK, 0) << seals;
  EXPECT_NE(seals & F_SEAL_GROW, 0) << seals;
  EXPECT_NE(::ftruncate(handle.fd.get(), 0), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::ftruncate(handle.fd.get(), 1 << 20), 0);
  sim_backend().memset(1, x.get(), 0x33, 5000);  // the allocation is intact
  EXPECT_EQ(read_back(x.get(), 5000, 1), std::vector<unsigned char>(5000, 0x33));

  // The handle's device must be the one its header names.
  IpcHandle other_device = handle.clone();
  other_device.device = Device("sim:0");
  std::string message = error_of<DeviceError>([&] { sim_backend().ipc_import(other_device); });
  EXPECT_NE(message.find("sim:0: ipc_import: expected a handle exported from sim:0 (the handle's "
                         "device), but its header says sim:1"),
            std::string::npos)
      << message;

  // A memory file that could still shrink is refused, and so is a descriptor of another kind.
  IpcHandle unsealed = handle.clone();
  unsealed.fd = UniqueFd(::memfd_create("ferry-test-unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  ASSERT_TRUE(unsealed.fd.valid());
  ASSERT_EQ(::ftruncate(unsealed.fd.get(), 1 << 16), 0);
  message = error_of<DeviceError>([&] { sim_backend().ipc_import(unsealed); });
  EXPECT_NE(message.find("sim:1: ipc_import: expected a memory file sealed against shrinking, but "
                         "its seals allow shrinking"),
            std::string::npos)
      << message;
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  UniqueFd write_end(pipe_fds[1]);
  IpcHandle not_a_file = handle.clone();
  not_a_file.fd = UniqueFd(pipe_fds[0]);
  message = error_of<DeviceError>([&] { sim_backend().ipc_import(not_a_file); });
  EXPECT_NE(message.find("sim:1: ipc_import: expected a memory file"), std::string::npos)
      << message;
}

// Whether a connection is waiting (within half a second).
bool poll_listener(const IpcListener& listener) {
  pollfd p{listener.fd(), POLLIN, 0};
  return ::poll(&p, 1, 500) > 0;
}

// The child's half of CrossProcess: import, check the parent's bytes, write through a stream.
void run_child(const std::string& path) {
  IpcConnection parent = IpcConnection::connect(path, 60s);
  parent.set_timeout(60s);
  const IpcHandle handle = parent.receive_handle();
  IpcMapping mapping(handle);
  const size_t n = mapping.size();
  const int device = mapping.device().index();
  const bool parent_bytes_seen =
      read_back(mapping.get(), n, device) == std::vector<unsigned char>(n, 0x11);
  const Stream s = get_stream_from_pool(mapping.device());
  PinnedBuffer pattern(n / 2);
  for (size_t i = 0; i < n / 2; ++i) pattern.get()[i] = static_cast<unsigned char>(i % 251);
  Backend& b = get_backend(DeviceType::Sim);
  b.memset_async(device, mapping.get(), 0x5A, n / 2, s.raw());
  b.memcpy_async(device, static_cast<char*>(mapping.get()) + n / 2, pattern.get(), n / 2,
                 CopyKind::HostToDevice, s.raw());
  s.synchronize();
  parent.send_value<uint8_t>(parent_bytes_seen ? 1 : 0);
  EXPECT_TRUE(parent_bytes_seen);
}

TEST_F(SimIpcTest, ChildProcessImportsWritesAndParentSeesTheBytes) {
  if (const char* path = std::getenv(kChildVariable)) {
    run_child(path);
    return;
  }
  constexpr size_t n = 1 << 20;
  SimBuffer x(1, n);
  sim_backend().memset(1, x.get(), 0x11, n);
  const IpcHandle handle = export_ipc_handle(Device("sim:1"), x.get());
  const std::string path = unique_name("child");
  IpcListener listener(path);

  // Re-execute this binary running only this test, as the child.
  char exe[4096] = {};
  ASSERT_GT(::readlink("/proc/self/exe", exe, sizeof(exe) - 1), 0);
  const std::string filter =
      "--gtest_filter=" +
      std::string(::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name()) +
      "." + ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  env_strings.push_back(std::string(kChildVariable) + "=" + path);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string arg0 = exe;
  std::vector<char*> argv = {arg0.data(), const_cast<char*>(filter.c_str()), nullptr};
  pid_t child = -1;
  ASSERT_EQ(::posix_spawn(&child, exe, nullptr, nullptr, argv.data(), envp.data()), 0);

  // Accept in short slices so that a child that dies early fails the test at once.
  IpcConnection connection;
  for (int waited = 0; !connection.is_open(); ++waited) {
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, WNOHANG), 0) << "the child exited early, status " << status;
    ASSERT_LT(waited, 240) << "the child did not connect within 120 s";
    if (poll_listener(listener)) connection = listener.accept(0ms);
  }
  connection.set_timeout(120s);
  connection.send_handle(handle);
  const uint8_t child_saw_parent_bytes = connection.receive_value<uint8_t>();
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "child status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(child_saw_parent_bytes, 1);

  const std::vector<unsigned char> bytes = read_back(x.get(), n, 1);
  for (size_t i = 0; i < n / 2; ++i) ASSERT_EQ(bytes[i], 0x5A) << "byte " << i;
  for (size_t i = n / 2; i < n; ++i) {
    ASSERT_EQ(bytes[i], static_cast<unsigned char>((i - n / 2) % 251)) << "byte " << i;
  }
}

}  // namespace
}  // namespace ferry::testing
