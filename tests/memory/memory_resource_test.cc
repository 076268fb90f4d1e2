// The memory-resource interface: a user resource under ferry's device tensors (per device and
// per device type), the checks and counters of the non-virtual front, and record_stream with a
// resource that does not track streams, and device view storages.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "ferry/device/guard.h"
#include "ferry/ferry.h"
#include "ferry/memory/caching_allocator.h"
#include "ferry/memory/memory_resource.h"
#include "tests/memory/memory_fixture.h"

namespace ferry::testing {
namespace {

using memory::MemoryResource;

// Straight to the backend, counting calls and remembering what it was asked. Frees only when
// destroyed: the sim's free waits for every stream, and some tests keep one busy meanwhile.
class CountingResource final : public MemoryResource {
 public:
  CountingResource() = default;
  ~CountingResource() override {
    for (const auto& [device, p] : to_free) get_backend(DeviceType::Sim).free(device, p);
  }

  std::atomic<int> allocs{0};
  std::atomic<int> deallocs{0};
  std::mutex mutex;
  std::vector<size_t> sizes;
  std::vector<Stream> dealloc_streams;
  std::vector<std::pair<int, void*>> to_free;

 private:
  void* do_allocate(size_t bytes, const Stream& stream) override {
    ++allocs;
    std::lock_guard<std::mutex> lock(mutex);
    sizes.push_back(bytes);
    return get_backend(stream.device_type()).malloc(stream.device_index(), bytes);
  }
  void do_deallocate(void* ptr, size_t bytes, const Stream& stream) override {
    ++deallocs;
    {
      std::lock_guard<std::mutex> lock(mutex);
      EXPECT_EQ(bytes, sizes.back());
      dealloc_streams.push_back(stream);
      to_free.emplace_back(stream.device_index(), ptr);
    }
  }
};

// Returns pointers that break the alignment promise.
class MisalignedResource final : public MemoryResource {
 public:
  int deallocated = 0;

 private:
  void* do_allocate(size_t, const Stream&) override { return storage_ + 8; }
  void do_deallocate(void*, size_t, const Stream&) override { ++deallocated; }
  alignas(256) char storage_[512] = {};
};

class ResourceScope {
 public:
  ResourceScope(Device device, MemoryResource* r)
      : device_(device), previous_(memory::set_memory_resource(device, r)) {}
  ~ResourceScope() { memory::set_memory_resource(device_, previous_); }

 private:
  Device device_;
  MemoryResource* previous_;
};

using MemoryResourceTest = MemoryTest;

TEST_F(MemoryResourceTest, UserResourceServesTheTensorsOfItsDevice) {
  CountingResource counting;
  EXPECT_EQ(memory::get_memory_resource(kSim1), memory::caching_allocator());
  {
    ResourceScope scope(kSim1, &counting);
    EXPECT_EQ(memory::get_memory_resource(kSim1), &counting);
    EXPECT_EQ(memory::get_memory_resource(kSim0), memory::caching_allocator());
    const memory::Stats cached_before = memory::stats(kSim1);
    Tensor t = empty({1000}, kSim1);
    EXPECT_EQ(counting.allocs.load(), 1);
    EXPECT_EQ(counting.sizes.back(), 4000u);
    EXPECT_EQ(memory::storage_memory_resource(t.storage()), &counting);
    EXPECT_EQ(counting.allocations().current, 1);
    EXPECT_EQ(counting.allocated_bytes().current, 4000);
    EXPECT_EQ(memory::stats(kSim1).allocation.allocated, cached_before.allocation.allocated)
        << "the caching allocator should not have been asked";
    Tensor on_other_device = empty({10}, kSim0);
    EXPECT_EQ(counting.allocs.load(), 1);
  }
  // Tensors made earlier go back to their own resource after it is replaced.
  EXPECT_EQ(counting.deallocs.load(), 1);
  EXPECT_EQ(counting.allocations().current, 0);
  EXPECT_EQ(counting.allocations().peak, 1);
  EXPECT_EQ(memory::get_memory_resource(kSim1), memory::caching_allocator());
}

TEST_F(MemoryResourceTest, ResourcePerDeviceTypeAndPerDevice) {
  CountingResource for_type, for_device;
  MemoryResource* previous = memory::set_memory_resource(DeviceType::Sim, &for_type);
  EXPECT_EQ(previous, nullptr);
  {
    ResourceScope scope(kSim0, &for_device);
    Tensor a = empty({4}, kSim0);
    Tensor b = empty({4}, kSim1);
    EXPECT_EQ(for_device.allocs.load(), 1);
    EXPECT_EQ(for_type.allocs.load(), 1);
  }
  EXPECT_EQ(memory::set_memory_resource(DeviceType::Sim, nullptr), &for_type);
  EXPECT_THROW(memory::set_memory_resource(DeviceType::CPU, &for_type), DeviceError);
  EXPECT_EQ(for_type.deallocs.load() + for_device.deallocs.load(), 2);
}

TEST_F(MemoryResourceTest, TensorsAllocateAndFreeOnTheCurrentStream) {
  CountingResource counting;
  ResourceScope scope(kSim0, &counting);
  const Stream side(kSim0, 4);
  {
    StreamGuard guard(side);
    Tensor t = empty({8}, kSim0);
    EXPECT_EQ(memory::storage_allocation_stream(t.storage()), side);
  }
  ASSERT_EQ(counting.dealloc_streams.size(), 1u);
  EXPECT_EQ(counting.dealloc_streams[0], side);
}

TEST_F(MemoryResourceTest, RecordStreamOnAnUntrackingResourceOrdersTheFreeingStream) {
  CountingResource counting;
  ResourceScope scope(kSim0, &counting);
  const Stream mine = current_stream(kSim0);
  const Stream side = get_stream_from_pool(kSim0);
  StreamGate gate(side);
  {
    Tensor t = empty({8}, kSim0);
    t.record_stream(side);
  }
  EXPECT_EQ(counting.deallocs.load(), 1);
  // The memory went back on `mine`, which now waits for the side stream's work.
  EXPECT_FALSE(mine.query()) << "the deallocating stream should wait for the recorded stream";
  gate.open_and_wait();
  mine.synchronize();
  EXPECT_TRUE(mine.query());
}

// Views of one allocation (device_view_storage): each its own storage; the allocation goes back
// once, when the last view and the owner are gone, and record_stream through a view orders that
// free after the recorded stream.
TEST_F(MemoryResourceTest, DeviceViewStoragesShareOneAllocation) {
  CountingResource counting;
  ResourceScope scope(kSim0, &counting);
  const Stream mine = current_stream(kSim0);
  const Stream side = get_stream_from_pool(kSim0);
  StreamGate gate(side);
  {
    Storage a, b;
    {
      const Tensor block = empty({1024}, TensorOptions(kUInt8).device(kSim0));
      a = memory::device_view_storage(block.storage(), 0, 256);
      b = memory::device_view_storage(a, 256, 512);  // a view of a view: still the block
      EXPECT_EQ(static_cast<char*>(b.data()), static_cast<char*>(block.data_ptr()) + 256);
      EXPECT_EQ(b.nbytes(), 512u);
      EXPECT_EQ(b.device(), kSim0);
      EXPECT_FALSE(a.is_alias_of(b));
      EXPECT_EQ(memory::storage_memory_resource(b), &counting);
      EXPECT_EQ(memory::storage_allocation_stream(b), mine);
      EXPECT_THROW((void)memory::device_view_storage(block.storage(), 1000, 25), Error);
      EXPECT_THROW((void)memory::device_view_storage(randn({4}).storage(), 0, 4), Error);
    }
    EXPECT_EQ(counting.deallocs.load(), 0) << "the views keep the allocation";
    a = Storage();
    EXPECT_EQ(counting.deallocs.load(), 0);
    memory::record_stream(b, side);
  }
  EXPECT_EQ(counting.deallocs.load(), 1);
  EXPECT_EQ(counting.allocs.load(), 1);
  EXPECT_FALSE(mine.query()) << "record_stream through the view should order the free";
  gate.open_and_wait();
  mine.synchronize();
}

TEST_F(MemoryResourceTest, TheFrontChecksWhatResourcesReturn) {
  MisalignedResource bad;
  const Stream s = current_stream(kSim0);
  try {
    bad.allocate(64, s);
    ADD_FAILURE() << "expected an error for a misaligned pointer";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("aligned to 256 bytes"), std::string::npos) << e.what();
  }
  EXPECT_EQ(bad.deallocated, 1) << "the bad pointer should be handed back";
  EXPECT_EQ(bad.allocations().current, 0);
  EXPECT_EQ(bad.allocate(0, s), nullptr);
  EXPECT_THROW(bad.allocate(64, Stream()), DeviceError);
  EXPECT_NO_THROW(bad.deallocate(nullptr, 0, s));
  EXPECT_TRUE(bad.is_equal(bad));
  EXPECT_FALSE(bad.is_equal(*memory::caching_allocator()));
}

TEST_F(MemoryResourceTest, CachingAllocatorIsTheDefaultTensorAllocator) {
  EXPECT_EQ(get_allocator(DeviceType::Sim), memory::device_tensor_allocator(DeviceType::Sim));
  EXPECT_EQ(get_allocator(DeviceType::CUDA), memory::device_tensor_allocator(DeviceType::CUDA));
  Tensor t = empty({3}, kSim0);
  EXPECT_EQ(memory::storage_memory_resource(t.storage()), memory::caching_allocator());
  EXPECT_EQ(memory::storage_allocation_stream(t.storage()), current_stream(kSim0));
  EXPECT_EQ(memory::storage_memory_resource(empty({3}).storage()), nullptr);
  Tensor none = empty({0}, kSim0);
  EXPECT_EQ(none.data_ptr(), nullptr);
}

}  // namespace
}  // namespace ferry::testing
