// Direct host access on the sim (map_host_memory / host_device_pointer): kernels given a device
// tensor over pinned host memory compute exactly what they compute on a copy, they hold their
// stream for at least the host bytes they read over the h2d bandwidth (a lower bound plus a
// generous upper one, never a tight timing), copies from it are priced as host-to-device, and
// bad input is refused with a message naming what was expected and given.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "ferry/ferry.h"
#include "tests/device/sim_fixture.h"
#include "tests/support/errors.h"

namespace ferry {
namespace host_mapping_test {
namespace {

using testing::error_of;
using ::testing::HasSubstr;
using testing::stream_ms;

class HostMapping : public testing::SimTest {
 protected:
  void TearDown() override {
    for (int d = 0; d < device_count(DeviceType::Sim); ++d) {
      memory::empty_cache(Device(DeviceType::Sim, static_cast<DeviceIndex>(d)));
    }
    testing::SimTest::TearDown();
  }
};

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(Device(DeviceType::CPU)).contiguous();
  const Tensor y = b.to(Device(DeviceType::CPU)).contiguous();
  return x.sizes() == y.sizes() && x.dtype() == y.dtype() &&
         std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

TEST_F(HostMapping, KernelsOnMappedMemoryEqualTheCopiedPathBitwise) {
  const Device sim0("sim:0");
  const Tensor table = randn({1000, 64}).pin_memory();
  const Tensor weight = randn({48, 64}).pin_memory();
  const Tensor mapped_table = map_host_memory(table, sim0);
  const Tensor mapped_weight = map_host_memory(weight, sim0);
  EXPECT_EQ(mapped_table.device(), sim0);
  EXPECT_TRUE(is_host_mapped(mapped_table));
  EXPECT_FALSE(is_host_mapped(table.to(sim0)));
  const Tensor ids = randint(1000, {4, 16}, TensorOptions().device(sim0));
  const Tensor x = randn({8, 64}, TensorOptions().device(sim0));

  EXPECT_TRUE(bitwise_equal(embedding(mapped_table, ids), embedding(table.to(sim0), ids)));
  EXPECT_TRUE(bitwise_equal(linear(x, mapped_weight), linear(x, weight.to(sim0))));
  EXPECT_TRUE(bitwise_equal(mapped_weight * 3 + 1, weight.to(sim0) * 3 + 1));
  EXPECT_TRUE(bitwise_equal(mapped_table.sum(), table.to(sim0).sum()));
  // A view keeps its geometry; a copy out of mapped memory reads the host bytes.
  EXPECT_TRUE(bitwise_equal(mapped_table.narrow(0, 10, 5).t(), table.narrow(0, 10, 5).t()));
  EXPECT_TRUE(
      bitwise_equal(mapped_table.to(Device("sim:0"), kFloat32, false, /*copy=*/true), table));
}

TEST_F(HostMapping, AKernelHoldsItsStreamForTheHostBytesOverTheLink) {
  sim::SimConfig c;
  // 50 MB/s: the table's 4 MiB take ~84 ms over the link, several times the sum's own time even
  // under ThreadSanitizer (~21 ms there), so that a resident copy is clearly faster (at 200 MB/s
  // the two were level under TSan: 21.6 against 21.4 ms).
  constexpr double kBandwidth = 50e6;
  c.bandwidth[static_cast<size_t>(sim::Link::HostToDevice)] = kBandwidth;
  sim::configure(c);
  const Device sim0("sim:0");
  const Tensor table = randn({4096, 256}).pin_memory();
  const Tensor mapped = map_host_memory(table, sim0);
  const double expected_ms = static_cast<double>(table.nbytes()) / kBandwidth * 1e3;
  Tensor s;
  const double full_ms = stream_ms([&] { s = mapped.sum(); });
  EXPECT_GE(full_ms, expected_ms);
  EXPECT_LT(full_ms, 10 * expected_ms + 500);  // generous: a loaded host only lengthens it
  EXPECT_TRUE(bitwise_equal(s, table.sum()));

  // A lookup reads its rows only (8 rows: ~0.16 ms), not the table.
  const Tensor ids = arange(8, TensorOptions().dtype(kInt64).device(sim0));
  const double lookup_ms = stream_ms([&] { s = embedding(mapped, ids); });
  EXPECT_LT(lookup_ms, expected_ms / 2);

  // A resident copy of the table costs no link time in a kernel.
  const Tensor resident = table.to(sim0);
  const double resident_ms = stream_ms([&] { s = resident.sum(); });
  EXPECT_LT(resident_ms, full_ms);

  // Copying out of mapped memory crosses the host link too.
  Tensor dst = empty({4096, 256}, TensorOptions().device(sim0));
  const double copy_ms = stream_ms([&] { dst.copy_(mapped, /*non_blocking=*/true); });
  EXPECT_GE(copy_ms, expected_ms);
  EXPECT_TRUE(bitwise_equal(dst, table));
}

TEST_F(HostMapping, WritesThroughTheMappingReachTheHostBytes) {
  const Device sim0("sim:0");
  const Tensor host = zeros({256}).pin_memory();
  Tensor mapped = map_host_memory(host, sim0);
  mapped.fill_(2.5);
  device_synchronize(sim0);
  EXPECT_EQ(host.sum().item<float>(), 640.0f);
}

TEST_F(HostMapping, BadInputNamesWhatWasExpectedAndGiven) {
  const Tensor pageable = randn({16});
  EXPECT_THAT(error_of<DeviceError>([&] { map_host_memory(pageable, Device("sim:0")); }),
              HasSubstr("expected a tensor in pinned or registered host memory (64 bytes of "
                        "storage), but got pageable memory"));
  const Tensor pinned = randn({16}).pin_memory();
  EXPECT_THAT(error_of<DeviceError>([&] { map_host_memory(pinned, Device(DeviceType::CPU)); }),
              HasSubstr("expected a device (sim or cuda) to map host memory into, but got cpu"));
  EXPECT_THAT(
      error_of<DeviceError>([&] { map_host_memory(pinned.to(Device("sim:0")), Device("sim:1")); }),
      HasSubstr("expected a CPU tensor in pinned host memory, but got a tensor on sim:0"));
  EXPECT_THAT(error_of<DeviceError>([&] { map_host_memory(pinned, Device("sim:7")); }),
              HasSubstr("expected a device index below 2"));
  // An error is a ferry::Error.
  EXPECT_THROW(map_host_memory(pageable, Device("sim:0")), Error);
}

TEST_F(HostMapping, TheBackendCallsCheckTheirArguments) {
  Backend& backend = sim_backend();
  std::vector<char> pageable(4096);
  EXPECT_THAT(error_of<DeviceError>(
                  [&] { backend.host_device_pointer(0, pageable.data(), pageable.size()); }),
              HasSubstr("expected pinned or registered host memory, but the range is pageable"));
  testing::PinnedBuffer pinned(8192);
  EXPECT_THAT(error_of<DeviceError>([&] { backend.host_device_pointer(0, pinned.get(), 0); }),
              HasSubstr("expected a non-empty range of pinned host memory, but got 0 bytes"));
  EXPECT_THAT(error_of<DeviceError>([&] { backend.host_device_pointer(0, pinned.get(), 9000); }),
              HasSubstr("expected pinned or registered host memory"));
  void* mapped = backend.host_device_pointer(1, pinned.get() + 100, 1000);
  EXPECT_EQ(sim::device_of(mapped), 1);
  EXPECT_TRUE(sim::is_host_mapped(mapped));
  EXPECT_EQ(sim::host_address(mapped), static_cast<void*>(pinned.get() + 100));
  // Not device memory: free and ipc_export refuse a mapping (here one starting at a page).
  void* whole = backend.host_device_pointer(0, pinned.get(), 4096);
  EXPECT_THAT(error_of<DeviceError>([&] { backend.free(0, whole); }),
              HasSubstr("expected device memory, but"));
  EXPECT_THAT(error_of<DeviceError>([&] { backend.free(0, whole); }),
              HasSubstr("maps pinned host memory"));
  EXPECT_THAT(error_of<DeviceError>([&] { backend.ipc_export(0, whole); }),
              HasSubstr("maps pinned host memory"));
  backend.release_host_device_pointer(0, whole);
  EXPECT_THAT(error_of<DeviceError>([&] { backend.release_host_device_pointer(0, mapped); }),
              HasSubstr("expected an address host_device_pointer returned for sim:0"));
  testing::SimBuffer device_memory(0, 4096);
  EXPECT_THAT(
      error_of<DeviceError>([&] { backend.release_host_device_pointer(0, device_memory.get()); }),
      HasSubstr("expected an address host_device_pointer returned"));
  backend.release_host_device_pointer(1, mapped);
  EXPECT_FALSE(sim::is_host_mapped(mapped));
}

}  // namespace
}  // namespace host_mapping_test
}  // namespace ferry
