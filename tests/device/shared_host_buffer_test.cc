// SharedHostBuffer and safetensors::load_into_shared on the sim: the buffer is pinned, exports
// and imports (errors for handles that are not one), and across real processes (this binary
// re-executed as the child) a child maps a safetensors file the parent loaded once, rebuilds its
// tensors equal to the file's, and writes through the same pages the parent reads.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ferry/device/ipc.h"
#include "ferry/device/runtime.h"
#include "ferry/memory/shared_host_buffer.h"
#include "ferry/nn/safetensors.h"
#include "ferry/nn/safetensors_shared.h"
#include "ferry/ops/factories.h"
#include "tests/device/child_process.h"
#include "tests/device/sim_fixture.h"
#include "tests/support/errors.h"
#include "tests/support/random.h"

namespace ferry::testing {
namespace {

using namespace std::chrono_literals;
using memory::SharedHostBuffer;
using SharedHostBufferTest = SimTest;

constexpr const char* kSharedBufferChildVariable = "FERRY_TEST_SHARED_BUFFER_CHILD";

TEST_F(SharedHostBufferTest, PinnedExportableAndTheSamePagesWhenImported) {
  SharedHostBuffer buffer(10000);
  ASSERT_TRUE(buffer);
  EXPECT_EQ(buffer.size(), 10000u);
  EXPECT_TRUE(buffer.is_pinned());
  EXPECT_TRUE(is_pinned(buffer.data(), buffer.size()));
  {
    SharedHostBuffer imported = SharedHostBuffer::import(buffer.export_handle());
    EXPECT_NE(imported.data(), buffer.data()) << "a second mapping, not the same address";
    EXPECT_EQ(imported.size(), buffer.size());
    EXPECT_TRUE(is_pinned(imported.data(), imported.size()));
    static_cast<unsigned char*>(buffer.data())[9999] = 0x3C;
    EXPECT_EQ(static_cast<unsigned char*>(imported.data())[9999], 0x3C);
    static_cast<unsigned char*>(imported.data())[0] = 0xC3;
    EXPECT_EQ(static_cast<unsigned char*>(buffer.data())[0], 0xC3);
    // Moving keeps the one registration.
    SharedHostBuffer moved = std::move(imported);
    EXPECT_FALSE(imported);
    EXPECT_TRUE(is_pinned(moved.data(), moved.size()));
  }
  EXPECT_TRUE(is_pinned(buffer.data(), buffer.size())) << "the importer's reset unregistered ours";
  void* data = buffer.data();
  buffer.reset();
  EXPECT_FALSE(is_pinned(data, 1));
}

TEST_F(SharedHostBufferTest, HandlesThatAreNotABufferAreRefused) {
  SharedHostBuffer buffer(5000);
  IpcHandle handle = buffer.export_handle();
  IpcHandle bad_bytes = handle.clone();
  bad_bytes.bytes.resize(3);
  std::string message = error_of<DeviceError>([&] { SharedHostBuffer::import(bad_bytes); });
  EXPECT_NE(message.find("expected a SharedHostBuffer handle (8 bytes, FERRYSHB)"),
            std::string::npos)
      << message;
  IpcHandle wrong_size = handle.clone();
  wrong_size.size = 50000;
  message = error_of<DeviceError>([&] { SharedHostBuffer::import(wrong_size); });
  EXPECT_NE(message.find("expected a memory file of 53248 bytes"), std::string::npos) << message;
  IpcHandle unsealed = handle.clone();
  unsealed.fd = UniqueFd(::memfd_create("ferry-test-unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  ASSERT_EQ(::ftruncate(unsealed.fd.get(), 8192), 0);
  message = error_of<DeviceError>([&] { SharedHostBuffer::import(unsealed); });
  EXPECT_NE(message.find("expected a memory file sealed against shrinking and growing, but its "
                         "seals allow resizing"),
            std::string::npos)
      << message;
  IpcHandle no_fd = handle.clone();
  no_fd.fd.reset();
  message = error_of<DeviceError>([&] { SharedHostBuffer::import(no_fd); });
  EXPECT_NE(message.find("but got no descriptor"), std::string::npos) << message;
  message = error_of<DeviceError>([] { SharedHostBuffer empty(0); });
  EXPECT_NE(message.find("expected a size above 0 bytes"), std::string::npos) << message;
}

// A small safetensors file of random tensors; its path.
std::string write_random_safetensors(std::mt19937_64& rng) {
  TensorDict tensors;
  const std::vector<std::pair<std::string, std::vector<int64_t>>> specs = {
      {"layer0.weight", {static_cast<int64_t>(rng() % 50 + 1), 33}},
      {"layer0.bias", {33}},
      {"embedding", {static_cast<int64_t>(rng() % 300 + 100), 64}},
  };
  for (const auto& [name, shape] : specs) {
    Tensor t = empty(shape, TensorOptions(kFloat32));
    auto* p = static_cast<float*>(t.data_ptr());
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(rng() % 100000) / 7.0f;
    tensors.insert(name, t);
  }
  Tensor ids = empty({static_cast<int64_t>(rng() % 20 + 1)}, TensorOptions(kInt64));
  for (int64_t i = 0; i < ids.numel(); ++i) static_cast<int64_t*>(ids.data_ptr())[i] = rng();
  tensors.insert("ids", ids);
  const std::string dir =
      ::testing::TempDir() + "ferry-shared-buffer-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/weights.safetensors";
  safetensors::save(path, tensors);
  return path;
}

// Whether two dicts hold the same names, dtypes, shapes and bytes, in the same order.
bool same_tensors(const TensorDict& a, const TensorDict& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const Tensor& x = a[i].value();
    const Tensor& y = b[i].value();
    if (a[i].key() != b[i].key() || x.scalar_type() != y.scalar_type() ||
        !(x.sizes() == y.sizes()) || x.nbytes() != y.nbytes() ||
        std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) != 0) {
      return false;
    }
  }
  return true;
}

TEST_F(SharedHostBufferTest, LoadIntoSharedGivesTheFilesTensorsAsViews) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const std::string path = write_random_safetensors(rng);
  const safetensors::SharedSafetensors shared = safetensors::load_into_shared(path);
  EXPECT_EQ(shared.buffer->size(), std::filesystem::file_size(path));
  EXPECT_TRUE(shared.buffer->is_pinned());
  const TensorDict tensors = shared.tensors();
  EXPECT_TRUE(same_tensors(tensors, safetensors::load(path)));
  const auto* begin = static_cast<const char*>(shared.buffer->data());
  for (const auto& item : tensors) {
    const auto* p = static_cast<const char*>(item.value().data_ptr());
    EXPECT_TRUE(p >= begin && p + item.value().nbytes() <= begin + shared.buffer->size())
        << item.key() << " is not a view of the buffer";
    EXPECT_TRUE(item.value().is_pinned()) << item.key();
  }
  // A buffer that does not hold a safetensors image is refused.
  auto garbage = std::make_shared<SharedHostBuffer>(100);
  std::memset(garbage->data(), 0xFF, 100);
  EXPECT_THROW(safetensors::open_shared(garbage, "garbage"), Error);
}

// Child: maps the parent's buffer, rebuilds the tensors, compares them with the file, checks
// they are pinned views of its mapping, and writes a marker the parent must see.
void shared_buffer_child(const std::string& socket) {
  IpcConnection parent = IpcConnection::connect(socket, 60s);
  parent.set_timeout(60s);
  const auto path_length = parent.receive_value<uint32_t>();
  std::string path(path_length, '\0');
  parent.receive_bytes(path.data(), path.size());
  auto buffer =
      std::make_shared<SharedHostBuffer>(SharedHostBuffer::import(parent.receive_handle()));
  const safetensors::SharedSafetensors shared = safetensors::open_shared(buffer, "from the parent");
  const TensorDict tensors = shared.tensors();
  uint8_t ok = same_tensors(tensors, safetensors::load(path)) ? 1 : 0;
  const auto* begin = static_cast<const char*>(buffer->data());
  for (const auto& item : tensors) {
    const auto* p = static_cast<const char*>(item.value().data_ptr());
    if (p < begin || p >= begin + buffer->size() || !item.value().is_pinned()) ok = 0;
  }
  static_cast<unsigned char*>(buffer->data())[buffer->size() - 1] ^= 0x5A;
  parent.send_value<uint8_t>(ok);
  EXPECT_EQ(ok, 1);
}

TEST_F(SharedHostBufferTest, ChildMapsTheParentsLoadAndSharesItsPages) {
  if (const char* socket = child_socket_path(kSharedBufferChildVariable)) {
    shared_buffer_child(socket);
    return;
  }
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const std::string path = write_random_safetensors(rng);
  const safetensors::SharedSafetensors shared = safetensors::load_into_shared(path);
  auto* bytes = static_cast<unsigned char*>(shared.buffer->data());
  const unsigned char last = bytes[shared.buffer->size() - 1];

  const std::string socket = child_socket_name("shared-buffer");
  IpcListener listener(socket);
  const pid_t child = spawn_test_child(kSharedBufferChildVariable, socket);
  ASSERT_GT(child, 0);
  IpcConnection connection = accept_test_child(listener, child);
  ASSERT_TRUE(connection.is_open());
  connection.send_value<uint32_t>(static_cast<uint32_t>(path.size()));
  connection.send_bytes(path.data(), path.size());
  connection.send_handle(shared.buffer->export_handle());
  EXPECT_EQ(connection.receive_value<uint8_t>(), 1) << "the child's tensors differ from the file's";
  EXPECT_EQ(wait_test_child(child), 0);
  // The child's write landed in our pages: one copy of the weights, not two.
  EXPECT_EQ(bytes[shared.buffer->size() - 1], static_cast<unsigned char>(last ^ 0x5A));
}

}  // namespace
}  // namespace ferry::testing
