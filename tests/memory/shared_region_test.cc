// Shared regions: a region imported over IPC is adopted, its sub-regions serve the threads that
// entered their pools (split and merged, never falling back to the backend) and nothing else —
// not other threads on the same pool streams — and dropping them forgets the bookkeeping
// all-or-nothing without freeing the memory; bad arguments are rejected.
#include <gtest/gtest.h>

#include <optional>
#include <thread>

#include "ferry/device/guard.h"
#include "ferry/device/ipc.h"
#include "ferry/ferry.h"
#include "ferry/memory/caching_allocator.h"
#include "ferry/memory/fixed_range_resource.h"
#include "ferry/memory/mem_pool.h"
#include "ferry/memory/shared_region.h"
#include "tests/memory/memory_fixture.h"

namespace ferry::testing {
namespace {

constexpr size_t kRegionBytes = 64 * kMiB;

bool within_shared_region(const void* p, const void* base, size_t size) {
  const auto* c = static_cast<const char*>(p);
  const auto* b = static_cast<const char*>(base);
  return c >= b && c < b + size;
}

memory::FixedRangeStats sub_region_stats(const memory::MemPool& pool) {
  return dynamic_cast<memory::FixedRangeResource&>(*pool.resource()).stats();
}

// The region as a worker sees it: another allocation, exported and mapped again through IPC.
// Drops whatever the test left adopted before unmapping, so a failed test cannot leave a
// sub-region pointing at unmapped memory.
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
    params_.reset();
    work_.reset();
    mapping_.reset();
    get_backend(DeviceType::Sim).free(0, owner_);
    MemoryTest::TearDown();
  }

  void adopt_pipeswitch_layout() {
    memory::adopt_shared_region(kSim0, "model", base_, kRegionBytes);
    params_.emplace(memory::add_sub_region(kSim0, "model", "parameters", 0, 16 * kMiB));
    work_.emplace(memory::add_sub_region(kSim0, "model", "workspace", 16 * kMiB, 48 * kMiB));
  }

  std::optional<memory::MemPool> params_;
  std::optional<memory::MemPool> work_;
  void* owner_ = nullptr;
  IpcMapping mapping_;
  char* base_ = nullptr;
};

TEST_F(SharedRegionTest, SubRegionsServeTheThreadsInTheirPools) {
  adopt_pipeswitch_layout();
  memory::Stats st = memory::stats(kSim0);
  EXPECT_EQ(st.shared_bytes.current, static_cast<int64_t>(kRegionBytes));
  EXPECT_EQ(st.reserved_bytes.current, 0);
  {
    std::optional<memory::UseMemPool> use(std::in_place, *params_);
    Tensor w = device_bytes(4 * kMiB);
    Tensor b = device_bytes(1000);
    EXPECT_EQ(w.data_ptr(), base_);
    EXPECT_EQ(b.data_ptr(), base_ + 4 * kMiB);
    EXPECT_EQ(memory::storage_memory_resource(w.storage()), params_->resource());
    use.emplace(*work_);
    Tensor x = device_bytes(40 * kMiB);
    EXPECT_EQ(x.data_ptr(), base_ + 16 * kMiB);
    use.reset();
    Tensor y = device_bytes(4 * kMiB);
    EXPECT_FALSE(within_shared_region(y.data_ptr(), base_, kRegionBytes));

    st = memory::stats(kSim0);
    EXPECT_EQ(st.allocation.current, 1) << "y only: the sub-regions count their own";
    EXPECT_EQ(st.reserved_bytes.current, static_cast<int64_t>(20 * kMiB)) << "y only";
    EXPECT_EQ(st.shared_bytes.current, static_cast<int64_t>(kRegionBytes));

    const auto regions = memory::shared_regions(kSim0);
    ASSERT_EQ(regions.size(), 1u);
    EXPECT_EQ(regions[0].name, "model");
    EXPECT_EQ(regions[0].base, base_);
    ASSERT_EQ(regions[0].sub_regions.size(), 2u);
    EXPECT_EQ(regions[0].sub_regions[0].name, "parameters");
    EXPECT_EQ(regions[0].sub_regions[0].allocations, 2);
    EXPECT_EQ(regions[0].sub_regions[0].allocated_bytes, 4 * kMiB + 1024);
    EXPECT_EQ(regions[0].sub_regions[1].name, "workspace");
    EXPECT_EQ(regions[0].sub_regions[1].offset, 16 * kMiB);
    EXPECT_EQ(regions[0].sub_regions[1].allocated_bytes, 40 * kMiB);

    int sub_segments = 0;
    for (const auto& seg : memory::snapshot(kSim0).segments) {
      if (seg.shared_region != "model") continue;
      ++sub_segments;
      if (seg.sub_region == "parameters") {
        EXPECT_EQ(seg.address, base_);
        EXPECT_EQ(seg.allocated_bytes, 4 * kMiB + 1024);
        EXPECT_EQ(seg.blocks.size(), 3u);  // w, b, the rest
      }
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

// The bug this design fixes: sub-regions were bound to a stream id, and pool streams are handed
// out round-robin, so any code whose pool stream had that id allocated from (and could exhaust)
// the sub-region. Now only threads inside the pool reach it, whatever their streams.
TEST_F(SharedRegionTest, PoolStreamsOfOtherThreadsStayOutOfTheSubRegion) {
  adopt_pipeswitch_layout();
  const Stream user_stream = get_stream_from_pool(kSim0);
  StreamGuard user_guard(user_stream);
  memory::UseMemPool use(*params_);
  Tensor parameter = device_bytes(kMiB);
  ASSERT_EQ(parameter.data_ptr(), base_);

  bool saw_user_stream = false;
  std::thread other([&] {
    for (int i = 0; i < kStreamPoolSize; ++i) {
      const Stream s = get_stream_from_pool(kSim0);
      saw_user_stream = saw_user_stream || s == user_stream;
      StreamGuard guard(s);
      for (size_t bytes : {size_t{4096}, 2 * kMiB}) {
        Tensor t = device_bytes(bytes);
        EXPECT_FALSE(within_shared_region(t.data_ptr(), base_, kRegionBytes)) << s;
        EXPECT_EQ(memory::storage_memory_resource(t.storage()), memory::caching_allocator()) << s;
      }
    }
  });
  other.join();
  EXPECT_TRUE(saw_user_stream) << "the other thread went through every pool stream";
  const memory::FixedRangeStats st = sub_region_stats(*params_);
  EXPECT_EQ(st.allocation.current, 1) << "the user's parameter only";
  EXPECT_EQ(st.allocation.allocated, 1) << "nothing else ever came from the sub-region";
  EXPECT_EQ(memory::stats(kSim0).allocation.allocated, 2 * kStreamPoolSize);
}

TEST_F(SharedRegionTest, AFullSubRegionRaisesInsteadOfFallingBackToTheBackend) {
  adopt_pipeswitch_layout();
  memory::UseMemPool use(*params_);
  Tensor a = device_bytes(12 * kMiB);
  try {
    device_bytes(8 * kMiB);
    ADD_FAILURE() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("sub-region 'parameters' of region 'model'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("8.00 MiB"), std::string::npos) << msg;  // the request
    EXPECT_NE(msg.find("4.00 MiB"), std::string::npos) << msg;  // what is free
  }
  EXPECT_EQ(memory::stats(kSim0).reserved_bytes.current, 0);
  EXPECT_EQ(sub_region_stats(*params_).num_ooms, 1);
  Tensor b = device_bytes(4 * kMiB);  // exactly what is left
  EXPECT_EQ(b.data_ptr(), base_ + 12 * kMiB);
}

TEST_F(SharedRegionTest, DropIsAllOrNothingAndNeverFreesTheMemory) {
  adopt_pipeswitch_layout();
  {
    memory::UseMemPool use(*params_);
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
    EXPECT_NO_THROW(device_bytes(kMiB)) << "the sub-region still serves its pool";
    memory::drop_sub_region(kSim0, "model", "workspace");  // the other one is free to go
    EXPECT_EQ(memory::stats(kSim0).shared_bytes.current, static_cast<int64_t>(16 * kMiB));
    memory::check_invariants(kSim0);
  }
  memory::drop_sub_region(kSim0, "model", "parameters");
  EXPECT_EQ(memory::stats(kSim0).shared_bytes.current, 0);
  {
    memory::UseMemPool stale(*params_);  // a handle kept past the drop
    EXPECT_THROW(device_bytes(kMiB), Error) << "a dropped sub-region must not hand out memory";
  }
  // A model switch: the same memory, split differently for the next model.
  const memory::MemPool next = memory::add_sub_region(kSim0, "model", "parameters", 0, 32 * kMiB);
  EXPECT_EQ(memory::sub_region_pool(kSim0, "model", "parameters"), next);
  {
    memory::UseMemPool use(next);
    EXPECT_EQ(device_bytes(20 * kMiB).data_ptr(), base_);
  }
  memory::drop_shared_region(kSim0, "model");
  EXPECT_TRUE(memory::shared_regions(kSim0).empty());
  // The bytes are still mapped and usable: nothing freed them.
  get_backend(DeviceType::Sim).memset(0, base_, 7, kRegionBytes);
}

TEST_F(SharedRegionTest, DropWaitsForRecordedStreams) {
  adopt_pipeswitch_layout();
  const Stream side(kSim0, 3);
  StreamGate gate(side);
  {
    memory::UseMemPool use(*params_);
    Tensor t = device_bytes(kMiB);
    t.record_stream(side);
  }
  EXPECT_EQ(sub_region_stats(*params_).active_bytes.current, static_cast<int64_t>(kMiB));
  {
    DelayedOpener opener(gate);
    memory::drop_sub_region(kSim0, "model", "parameters");
    EXPECT_TRUE(side.query()) << "dropped before the recorded stream finished";
  }
  EXPECT_EQ(memory::stats(kSim0).shared_bytes.current, static_cast<int64_t>(48 * kMiB));
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

  EXPECT_THROW(add_sub_region(kSim0, "nope", "a", 0, kMiB), Error);
  EXPECT_THROW(add_sub_region(kSim0, "r", "a", 100, kMiB), Error);  // unaligned
  EXPECT_THROW(add_sub_region(kSim0, "r", "a", 0, 0), Error);       // empty
  EXPECT_THROW(add_sub_region(kSim0, "r", "a", 0, 2 * kRegionBytes), Error);
  EXPECT_THROW(add_sub_region(kSim1, "r", "a", 0, kMiB), Error) << "the region is on sim:0";
  const memory::MemPool a = add_sub_region(kSim0, "r", "a", 0, 8 * kMiB);
  EXPECT_THROW(add_sub_region(kSim0, "r", "a", 8 * kMiB, kMiB), Error);      // name
  EXPECT_THROW(add_sub_region(kSim0, "r", "b", 4 * kMiB, 8 * kMiB), Error);  // overlap
  EXPECT_THROW({ memory::UseMemPool use(a, kSim1); }, DeviceError) << "a pool of sim:0";
  EXPECT_THROW({ memory::UseMemPool use(a, Device("cpu")); }, DeviceError);
  EXPECT_THROW(memory::sub_region_pool(kSim0, "r", "b"), Error);
  EXPECT_THROW(memory::drop_sub_region(kSim0, "r", "b"), Error);
  EXPECT_THROW(memory::drop_sub_region(kSim0, "nope", "a"), Error);
  EXPECT_THROW(memory::drop_sub_region(kSim0, "r", ""), Error);
  memory::check_invariants(kSim0);
}

}  // namespace
}  // namespace ferry::testing
