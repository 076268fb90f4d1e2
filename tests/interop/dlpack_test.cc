// ferry::to_dlpack / export_dlpack / from_dlpack without Python: the DLTensor fields, zero-copy
// both ways, ownership (the producer's deleter runs exactly once, and only after the last
// tensor; a failed import leaves it to the caller), dtypes, version negotiation, read-only
// imports, and the sim's device, copy and stream handshake rules.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "ferry/device/guard.h"
#include "ferry/device/stream.h"
#include "ferry/interop/dlpack.h"
#include "ferry/ops/factories.h"
#include "tests/device/sim_fixture.h"

namespace ferry {
namespace {

// A DLManagedTensor[Versioned] over a host vector, as a foreign producer would make it; counts
// its deleter's calls.
template <typename Managed>
struct Foreign {
  std::vector<float> data = std::vector<float>(64);
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  int deleted = 0;
  Managed managed{};

  Foreign(std::vector<int64_t> sizes, std::vector<int64_t> element_strides, uint64_t byte_offset)
      : shape(std::move(sizes)), strides(std::move(element_strides)) {
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i);
    DLTensor& t = managed.dl_tensor;
    t.data = data.data();
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = static_cast<int>(shape.size());
    t.dtype = DLDataType{kDLFloat, 32, 1};
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
    t.byte_offset = byte_offset;
    managed.manager_ctx = this;
    managed.deleter = [](Managed* self) { ++static_cast<Foreign*>(self->manager_ctx)->deleted; };
  }
};

TEST(DLPack, ExportDescribesTheViewAndSharesItsMemory) {
  const int64_t before = dlpack_exports_alive();
  Tensor base = arange(60, kFloat32).view({3, 4, 5});
  Tensor view = base.permute({2, 0, 1}).slice(0, 1, 5, 2);  // sizes (2, 3, 4), offset 1
  DLManagedTensor* m = to_dlpack(view);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(dlpack_exports_alive(), before + 1);
  const DLTensor& t = m->dl_tensor;
  EXPECT_EQ(t.data, view.data_ptr());  // the first element, byte_offset 0
  EXPECT_EQ(t.byte_offset, 0u);
  EXPECT_EQ(t.device.device_type, kDLCPU);
  EXPECT_EQ(t.ndim, 3);
  EXPECT_EQ(t.dtype.code, kDLFloat);
  EXPECT_EQ(t.dtype.bits, 32);
  EXPECT_EQ(t.dtype.lanes, 1);
  for (int d = 0; d < 3; ++d) {
    EXPECT_EQ(t.shape[d], view.size(d));
    EXPECT_EQ(t.strides[d], view.stride(d));
  }
  // The export holds the storage: the producer's handles can go first.
  base = Tensor();
  view = Tensor();
  Tensor back = from_dlpack(m);
  EXPECT_EQ(back.sizes(), IntArrayRef({2, 3, 4}));
  EXPECT_EQ(back.strides(), IntArrayRef({2, 20, 5}));
  EXPECT_EQ(back.select(0, 1).select(0, 2).select(0, 3).item<float>(), 3 * 5 + 2 * 20 + 3 * 1);
  back.select(0, 0).fill_(-1.0f);
  EXPECT_EQ(back.select(0, 0).select(0, 0).select(0, 0).item<float>(), -1.0f);
  EXPECT_EQ(dlpack_exports_alive(), before + 1);
  back = Tensor();
  EXPECT_EQ(dlpack_exports_alive(), before);
}

TEST(DLPack, VersionedExportCarriesVersionAndFlags) {
  Tensor t = ones({4}, kFloat64);
  DLManagedTensorVersioned* m = to_dlpack_versioned(t);
  EXPECT_EQ(m->version.major, 1u);
  EXPECT_EQ(m->version.minor, 1u);
  EXPECT_EQ(m->flags, 0u);
  EXPECT_EQ(m->dl_tensor.data, t.data_ptr());
  m->deleter(m);

  // Negotiation: no max_version or 0.x gives a legacy struct; 1.0 a versioned 1.0; 2.x ours.
  DLPackExport e = export_dlpack(t);
  ASSERT_NE(e.legacy, nullptr);
  EXPECT_EQ(e.versioned, nullptr);
  e.legacy->deleter(e.legacy);
  e = export_dlpack(t, {.max_version = DLPackVersion{0, 8}});
  ASSERT_NE(e.legacy, nullptr);
  e.legacy->deleter(e.legacy);
  e = export_dlpack(t, {.max_version = DLPackVersion{1, 0}});
  ASSERT_NE(e.versioned, nullptr);
  EXPECT_EQ(e.versioned->version.minor, 0u);
  e.versioned->deleter(e.versioned);
  e = export_dlpack(t, {.max_version = DLPackVersion{2, 3}});
  ASSERT_NE(e.versioned, nullptr);
  EXPECT_EQ(e.versioned->version.major, 1u);
  EXPECT_EQ(e.versioned->version.minor, 1u);
  e.versioned->deleter(e.versioned);
}

TEST(DLPack, EveryDtypeRoundTripsAndFloat8NeedsDLPack11) {
  for (int i = 0; i < kNumScalarTypes; ++i) {
    const auto dtype = static_cast<ScalarType>(i);
    const DLDataType dl = to_dlpack_dtype(dtype);
    EXPECT_EQ(dtype_from_dlpack(dl), dtype) << dtype;
    EXPECT_EQ(dl.bits, element_size(dtype) * 8) << dtype;
    Tensor t = zeros({3}, dtype);
    Tensor back = from_dlpack(to_dlpack_versioned(t));
    EXPECT_EQ(back.dtype(), dtype);
    EXPECT_EQ(back.data_ptr(), t.data_ptr());
  }
  EXPECT_EQ(to_dlpack_dtype(kBool).code, dlpack::kBoolCode);
  EXPECT_EQ(to_dlpack_dtype(kBFloat16).code, kDLBfloat);
  EXPECT_EQ(to_dlpack_dtype(kComplex64).bits, 64);
  EXPECT_THROW(to_dlpack(zeros({2}, kFloat8_e4m3fn)), DLPackError);  // legacy: reads 0.x
  EXPECT_THROW(export_dlpack(zeros({2}, kFloat8_e5m2), {.max_version = DLPackVersion{1, 0}}),
               DLPackError);
  EXPECT_THROW(dtype_from_dlpack(DLDataType{kDLFloat, 32, 4}), DLPackError);  // lanes
  EXPECT_THROW(dtype_from_dlpack(DLDataType{kDLUInt, 16, 1}), DLPackError);
}

TEST(DLPack, ImportHonoursByteOffsetNullStridesAndRunsTheDeleterOnce) {
  Foreign<DLManagedTensor> f({2, 3}, {}, 4 * sizeof(float));
  Tensor t = from_dlpack(&f.managed);
  EXPECT_EQ(t.data_ptr(), f.data.data() + 4);
  EXPECT_EQ(t.strides(), IntArrayRef({3, 1}));
  EXPECT_EQ(t.select(0, 1).select(0, 2).item<float>(), 4 + 5);
  Tensor view = t.t();
  t = Tensor();
  EXPECT_EQ(f.deleted, 0);
  view = Tensor();
  EXPECT_EQ(f.deleted, 1);
}

TEST(DLPack, FailedImportLeavesTheTensorToTheCaller) {
  Foreign<DLManagedTensor> bad_dtype({4}, {1}, 0);
  bad_dtype.managed.dl_tensor.dtype = DLDataType{kDLOpaqueHandle, 64, 1};
  EXPECT_THROW(from_dlpack(&bad_dtype.managed), DLPackError);
  Foreign<DLManagedTensor> negative({4}, {-1}, 12);
  EXPECT_THROW(from_dlpack(&negative.managed), DLPackError);
  Foreign<DLManagedTensor> foreign_device({4}, {1}, 0);
  foreign_device.managed.dl_tensor.device = DLDevice{kDLVulkan, 0};
  EXPECT_THROW(from_dlpack(&foreign_device.managed), DLPackError);
  EXPECT_EQ(bad_dtype.deleted + negative.deleted + foreign_device.deleted, 0);
}

TEST(DLPack, ReadOnlyImportsAreCopiedOrRefused) {
  Foreign<DLManagedTensorVersioned> f({4}, {1}, 0);
  f.managed.version = DLPackVersion{1, 0};
  f.managed.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  EXPECT_THROW(from_dlpack(&f.managed, {.copy = false}), DLPackError);
  EXPECT_EQ(f.deleted, 0);
  Tensor t = from_dlpack(&f.managed);
  EXPECT_EQ(f.deleted, 1);  // copied, and the producer released at once
  EXPECT_NE(t.data_ptr(), f.data.data());
  EXPECT_EQ(t.select(0, 3).item<float>(), 3.0f);

  Foreign<DLManagedTensorVersioned> future({4}, {1}, 0);
  future.managed.version = DLPackVersion{2, 0};
  EXPECT_THROW(from_dlpack(&future.managed), DLPackError);
  EXPECT_EQ(future.deleted, 0);
}

TEST(DLPack, LazyBitsNeedACopy) {
  Tensor c = full({3}, Scalar(std::complex<double>(1, 2)), kComplex64).conj();
  EXPECT_THROW(to_dlpack(c), DLPackError);
  DLPackExport e = export_dlpack(c);
  ASSERT_NE(e.legacy, nullptr);
  EXPECT_TRUE(e.copied);
  Tensor back = from_dlpack(e.legacy);
  EXPECT_FALSE(back.is_conj());
  EXPECT_EQ(back.select(0, 0).item<std::complex<float>>(), std::complex<float>(1, -2));
  EXPECT_THROW(export_dlpack(zeros({2}), {.stream = 3}), DLPackError);  // cpu: no streams
}

class DLPackSim : public testing::SimTest {};

TEST_F(DLPackSim, SimTensorsAreExtDevAndImportOnlyFromSimMemory) {
  Tensor t = arange(16, TensorOptions(kInt32).device(Device("sim:1")));
  EXPECT_EQ(to_dlpack_device(t.device()).device_type, kDLExtDev);
  EXPECT_EQ(to_dlpack_device(t.device()).device_id, 1);
  Tensor back = from_dlpack(to_dlpack(t.slice(0, 4)));
  EXPECT_EQ(back.device(), Device("sim:1"));
  EXPECT_EQ(back.data_ptr(), t.slice(0, 4).data_ptr());
  EXPECT_EQ(back.select(0, 0).item<int>(), 4);

  // Host memory, or sim memory of another device, is not read as a kDLExtDev tensor of sim:0.
  Foreign<DLManagedTensor> host({4}, {1}, 0);
  host.managed.dl_tensor.device = DLDevice{kDLExtDev, 0};
  EXPECT_THROW(from_dlpack(&host.managed), DLPackError);
  DLManagedTensor* other = to_dlpack(t);
  other->dl_tensor.device.device_id = 0;
  EXPECT_THROW(from_dlpack(other), DLPackError);
  other->deleter(other);
}

TEST_F(DLPackSim, CpuDeviceRequestCopiesUnlessForbidden) {
  Tensor t = arange(6, TensorOptions(kFloat32).device(Device("sim:0"))).view({2, 3}).t();
  EXPECT_THROW(export_dlpack(t, {.dl_device = DLDevice{kDLCPU, 0}, .copy = false}), DLPackError);
  DLPackExport e =
      export_dlpack(t, {.max_version = DLPackVersion{1, 1}, .dl_device = DLDevice{kDLCPU, 0}});
  ASSERT_NE(e.versioned, nullptr);
  EXPECT_TRUE(e.copied);
  EXPECT_EQ(e.versioned->flags, DLPACK_FLAG_BITMASK_IS_COPIED);
  EXPECT_EQ(e.versioned->dl_tensor.device.device_type, kDLCPU);
  const auto* data = static_cast<const float*>(e.versioned->dl_tensor.data);
  const int64_t* strides = e.versioned->dl_tensor.strides;
  EXPECT_EQ(data[1 * strides[0] + 0 * strides[1]], 1.0f);  // t[1][0] == original[0][1]
  EXPECT_EQ(data[2 * strides[0] + 1 * strides[1]], 5.0f);
  e.versioned->deleter(e.versioned);
  EXPECT_THROW(export_dlpack(t, {.dl_device = DLDevice{kDLExtDev, 7}}), DLPackError);
}

// The consumer's stream waits for the producer's work through an event; the host never blocks.
TEST_F(DLPackSim, ConsumerStreamWaitsForTheProducersStream) {
  const Device sim0("sim:0");
  const Stream producer(sim0, 1);
  const Stream consumer(sim0, 2);
  Tensor t = zeros({1024}, TensorOptions(kFloat32).device(sim0));
  producer.wait_stream(default_stream(sim0));
  testing::Gate gate;
  {
    StreamGuard on_producer(producer);
    enqueue_host_function(producer, gate.blocker());
    t.fill_(7.0f);  // queued behind the gate
    DLPackExport e = export_dlpack(t, {.stream = consumer.id()});
    EXPECT_FALSE(consumer.query()) << "the consumer's stream should wait for the fill";
    gate.open();
    consumer.synchronize();
    EXPECT_TRUE(producer.query());
    e.legacy->deleter(e.legacy);
  }
  EXPECT_FALSE(gate.timed_out());
  EXPECT_EQ(t.select(0, 1023).item<float>(), 7.0f);
  EXPECT_THROW(export_dlpack(t, {.stream = kStreamPoolSize + 1}), DLPackError);
}

}  // namespace
}  // namespace ferry
