// Shared regions: a region imported over IPC is adopted, its sub-regions serve their streams
// (split and merged, never falling back to the backend), and dropping them forgets the
// bookkeeping all-or-nothing without freeing the memory; bad arguments are rejected.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "ferry/device/guard.h"
#include "ferry/device/ipc.h"
#include "ferry/ferry.h"
#include "ferry/memory/caching_allocator.h"
#include "ferry/memory/shared_region.h"
#include "tests/memory/memory_fixture.h"

namespace ferry::testing {
namespace {

constexpr size_t kRegionBytes = 64 * kMiB;

bool within_region(const void* p, const void* base, size_t size) {
  const auto* c = static_cast<const char*>(p);
  const auto* b = static_cast<const char*>(base);
  return c >= b && c < b + size;
}

// The region as a worker sees it: another allocation, exported and mapped again through IPC.
// Drops whatever the test left adopted before unmapping, so a failed test cannot leave the
// allocator pointing at unmapped memory.
class SharedRegionTest : public MemoryTest {
 protected:
  void SetUp() override {
    MemoryTest::SetUp();
    owner_ = get_backend(DeviceType::Sim).malloc(0, kRegionBytes);
    mapping_ = IpcMapping(export_ipc_handle(kSim0, owner_));
    base_ = static_cast<char*>(mapping_.get());
  }
  void TearDown() override {
    for (const auto& region : memory::shared_regions(kSim0)) {
      try {
        memory::drop_shared_region(kSim0, region.name);
      } catch (const Error& e) {
        ADD_FAILURE() << "could not drop region '" << region.name << "': " << e.what();
      }
    }
    mapping_.reset();
    get_backend(DeviceType::Sim).free(0, owner_);
    MemoryTest::TearDown();
  }

  void adopt_pipeswitch_layout() {
    memory::adopt_shared_region(kSim0, "model", base_, kRegionBytes);
    memory::add_sub_region(kSim0, "model", "parameters", 0, 16 * kMiB, params_);
    memory::add_sub_region(kSim0, "model", "workspace", 16 * kMiB, 48 * kMiB, work_);
  }

  const Stream params_{kSim0, 5};
  const Stream work_{kSim0, 6};
  void* owner_ = nullptr;
  IpcMapping mapping_;
  char* base_ = nullptr;
};

TEST_F(SharedRegionTest, SubRegionsServeTheirStreams) {
  adopt_pipeswitch_layout();
  memory::Stats st = memory::stats(kSim0);
  EXPECT_EQ(st.shared_bytes.current, static_cast<int64_t>(kRegionBytes));
  EXPECT_EQ(st.reserved_bytes.current, 0);
  {
    StreamGuard guard(params_);
    Tensor w = device_bytes(4 * kMiB);
    Tensor b = device_bytes(1000);
    EXPECT_EQ(w.data_ptr(), base_);
    EXPECT_EQ(b.data_ptr(), base_ + 4 * kMiB);
    guard.reset_stream(work_);
    Tensor x = device_bytes(40 * kMiB);
    EXPECT_EQ(x.data_ptr(), base_ + 16 * kMiB);
    guard.reset_stream(default_stream(kSim0));
    Tensor y = device_bytes(4 * kMiB);
    EXPECT_FALSE(within_region(y.data_ptr(), base_, kRegionBytes));

    st = memory::stats(kSim0);
    EXPECT_EQ(st.allocation.current, 4);
    EXPECT_EQ(st.reserved_bytes.current, static_cast<int64_t>(20 * kMiB)) << "y only";
    EXPECT_EQ(st.shared_bytes.current, static_cast<int64_t>(kRegionBytes));

    const auto regions = memory::shared_regions(kSim0);
    ASSERT_EQ(regions.size(), 1u);
    EXPECT_EQ(regions[0].name, "model");
    EXPECT_EQ(regions[0].base, base_);
    ASSERT_EQ(regions[0].sub_regions.size(), 2u);
    EXPECT_EQ(regions[0].sub_regions[0].name, "parameters");
    EXPECT_EQ(regions[0].sub_regions[0].stream, params_);
    EXPECT_EQ(regions[0].sub_regions[0].allocations, 2);
    EXPECT_EQ(regions[0].sub_regions[0].allocated_bytes, 4 * kMiB + 1024);
    EXPECT_EQ(regions[0].sub_regions[1].name, "workspace");
    EXPECT_EQ(regions[0].sub_regions[1].offset, 16 * kMiB);

    int sub_segments = 0;
    for (const auto& seg : memory::snapshot(kSim0).segments) {
      if (seg.shared_region == "model") ++sub_segments;
    }
    EXPECT_EQ(sub_segments, 2);
    memory::check_invariants(kSim0);
  }
  // Freed blocks merge back: each sub-region is one free block again.
  for (const auto& seg : memory::snapshot(kSim0).segments) {
    if (!seg.sub_region.empty()) {
      EXPECT_EQ(seg.blocks.size(), 1u) << seg.sub_region;
    }
  }
  memory::empty_cache(kSim0);  // leaves the sub-regions alone
  EXPECT_EQ(memory::stats(kSim0).shared_bytes.current, static_cast<int64_t>(kRegionBytes));
  EXPECT_EQ(memory::stats(kSim0).reserved_bytes.current, 0);
}

TEST_F(SharedRegionTest, AFullSubRegionRaisesInsteadOfFallingBackToTheBackend) {
  adopt_pipeswitch_layout();
  StreamGuard guard(params_);
  Tensor a = device_bytes(12 * kMiB);
  try {
    device_bytes(8 * kMiB);
    ADD_FAILURE() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("sub-region 'parameters' of region 'model'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("4.00 MiB"), std::string::npos) << msg;  // the largest free block
  }
  const memory::Stats st = memory::stats(kSim0);
  EXPECT_EQ(st.reserved_bytes.current, 0);
  EXPECT_EQ(st.num_ooms, 1);
  Tensor b = device_bytes(4 * kMiB);  // exactly what is left
  EXPECT_EQ(b.data_ptr(), base_ + 12 * kMiB);
}

TEST_F(SharedRegionTest, DropIsAllOrNothingAndNeverFreesTheMemory) {
  adopt_pipeswitch_layout();
  {
    StreamGuard guard(params_);
    Tensor w = device_bytes(kMiB);
    try {
      memory::drop_sub_regions(kSim0, "model");
      ADD_FAILURE() << "expected an error while a sub-region block is allocated";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("1 is still allocated"), std::string::npos) << msg;
      EXPECT_NE(msg.find("sub-region 'parameters'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("1.00 MiB"), std::string::npos) << msg;
    }
    ASSERT_EQ(memory::shared_regions(kSim0).at(0).sub_regions.size(), 2u) << "nothing dropped";
    memory::drop_sub_region(kSim0, "model", "workspace");  // the other one is free to go
    EXPECT_EQ(memory::stats(kSim0).shared_bytes.current, static_cast<int64_t>(16 * kMiB));
    memory::check_invariants(kSim0);
  }
  memory::drop_sub_region(kSim0, "model", "parameters");
  EXPECT_EQ(memory::stats(kSim0).shared_bytes.current, 0);
  {
    StreamGuard guard(params_);  // back to the ordinary pools
    Tensor t = device_bytes(kMiB);
    EXPECT_FALSE(within_region(t.data_ptr(), base_, kRegionBytes));
  }
  // A model switch: the same memory, split differently for the next model.
  memory::add_sub_region(kSim0, "model", "parameters", 0, 32 * kMiB, params_);
  {
    StreamGuard guard(params_);
    EXPECT_EQ(device_bytes(20 * kMiB).data_ptr(), base_);
  }
  memory::drop_shared_region(kSim0, "model");
  EXPECT_TRUE(memory::shared_regions(kSim0).empty());
  // The bytes are still mapped and usable: nothing freed them.
  get_backend(DeviceType::Sim).memset(0, base_, 7, kRegionBytes);
}

TEST_F(SharedRegionTest, DropWaitsForRecordedStreams) {
  adopt_pipeswitch_layout();
  const Stream side(kSim0, 3);  // fixed: a pool stream could be the sub-region's own
  StreamGate gate(side);
  {
    StreamGuard guard(params_);
    Tensor t = device_bytes(kMiB);
    t.record_stream(side);
  }
  std::thread opener([&gate] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    gate.open();
  });
  memory::drop_sub_region(kSim0, "model", "parameters");
  opener.join();
  EXPECT_TRUE(side.query()) << "dropped before the recorded stream finished";
  EXPECT_EQ(memory::stats(kSim0).active.current, 0);
}

TEST_F(SharedRegionTest, RejectsBadRegionsAndSubRegions) {
  using memory::add_sub_region;
  using memory::adopt_shared_region;
  EXPECT_THROW(adopt_shared_region(kSim0, "r", base_ + 8, kMiB), Error);  // misaligned
  EXPECT_THROW(adopt_shared_region(kSim0, "r", base_, 0), Error);
  EXPECT_THROW(adopt_shared_region(kSim0, "", base_, kMiB), Error);
  EXPECT_THROW(adopt_shared_region(Device("cpu"), "r", base_, kMiB), DeviceError);
  adopt_shared_region(kSim0, "r", base_, kRegionBytes);
  EXPECT_THROW(adopt_shared_region(kSim0, "r", base_ + kRegionBytes, kMiB), Error);  // name
  EXPECT_THROW(adopt_shared_region(kSim0, "s", base_ + kMiB, kMiB), Error);          // overlap
  {
    Tensor ours = device_bytes(kMiB);  // memory the allocator owns cannot be adopted
    EXPECT_THROW(adopt_shared_region(kSim0, "s", ours.data_ptr(), kMiB), Error);
  }

  EXPECT_THROW(add_sub_region(kSim0, "nope", "a", 0, kMiB, params_), Error);
  EXPECT_THROW(add_sub_region(kSim0, "r", "a", 100, kMiB, params_), Error);  // unaligned
  EXPECT_THROW(add_sub_region(kSim0, "r", "a", 0, 0, params_), Error);       // empty
  EXPECT_THROW(add_sub_region(kSim0, "r", "a", 0, 2 * kRegionBytes, params_), Error);
  EXPECT_THROW(add_sub_region(kSim0, "r", "a", 0, kMiB, Stream(kSim1, 5)), DeviceError);
  add_sub_region(kSim0, "r", "a", 0, 8 * kMiB, params_);
  EXPECT_THROW(add_sub_region(kSim0, "r", "a", 8 * kMiB, kMiB, work_), Error);      // name
  EXPECT_THROW(add_sub_region(kSim0, "r", "b", 4 * kMiB, 8 * kMiB, work_), Error);  // overlap
  EXPECT_THROW(add_sub_region(kSim0, "r", "b", 8 * kMiB, kMiB, params_), Error);    // stream bound
  EXPECT_THROW(memory::drop_sub_region(kSim0, "r", "b"), Error);
  EXPECT_THROW(memory::drop_sub_region(kSim0, "nope", "a"), Error);
  EXPECT_THROW(memory::drop_sub_region(kSim0, "r", ""), Error);
  memory::check_invariants(kSim0);
}

}  // namespace
}  // namespace ferry::testing
