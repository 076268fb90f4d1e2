// The operations device tensors need besides copy_: fill_/zero_ (memset or the device kernel,
// queued on the current stream), item(), printing, factories with a device, to()/cpu()/
// pin_memory() semantics (no copy when nothing changes; a pinned result for a non-blocking move
// to the cpu; memory formats across devices), the temporaries decision for chosen cases, and the
// errors for devices that do not exist.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <complex>
#include <vector>

#include "ferry/ops/device_copy.h"
#include "tests/ops/naive_copy.h"
#include "tests/support/random.h"
#include "tests/xdev/xdev_util.h"

namespace ferry::testing {
namespace {

using ::testing::HasSubstr;

// fill_ on a device view reads back (through the view's bits) as the value, for every dtype,
// dense (memset or kernel) and strided, and leaves every other byte alone.
TEST_F(XdevTest, FillMatchesTheCpuFill) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  for (int t = 0; t < kNumScalarTypes; ++t) {
    const auto dtype = static_cast<ScalarType>(t);
    for (int variant = 0; variant < 6; ++variant) {
      Tensor host = random_view(rng, {5, 4, 3}, dtype, false, variant < 2);
      if (variant == 3 && is_complex(dtype)) host = host.conj();
      if (variant == 4) host = host._neg_view();
      if (variant == 5) host = host.select(1, 0).unsqueeze(1).expand({5, 4, 3});
      fill_random(host, rng);
      const Scalar value = is_complex(dtype)          ? Scalar(std::complex<double>(1.5, -2))
                           : dtype == kBool           ? Scalar(true)
                           : variant % 2 == 0         ? Scalar(0)
                           : is_floating_point(dtype) ? Scalar(-2.5)
                                                      : Scalar(int64_t{-3});
      Tensor dev = place(host, kSim1);
      host.fill_(value);
      dev.fill_(value);
      std::vector<uint8_t> want = read_storage(host);
      std::vector<uint8_t> got = read_storage(dev);
      EXPECT_EQ(got, want) << dtype << " variant " << variant << " value " << value;
      EXPECT_EQ(dev[4][3][2].item().to<std::complex<double>>(),
                host[4][3][2].item().to<std::complex<double>>())
          << dtype;
    }
  }
}

TEST_F(XdevTest, FillAndZeroAreQueuedOnTheCurrentStream) {
  const Stream pool = get_stream_from_pool(kSim0);
  set_current_stream(pool);
  Tensor x = full({1000}, 5, TensorOptions(kInt32).device(kSim0));
  device_synchronize(kSim0);
  {
    Gate gate(pool);
    x.zero_();                        // one memset
    x.slice(0, 0, 1000, 2).fill_(7);  // the kernel
    // Both queued behind the gate: not on the default stream, which is done without them.
    default_stream(kSim0).synchronize();
    for (int32_t v : peek_storage<int32_t>(x)) ASSERT_EQ(v, 5) << "a fill ran off the pool stream";
  }
  pool.synchronize();
  const Tensor h = x.cpu();
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(h.data_ptr<int32_t>()[i], i % 2 == 0 ? 7 : 0);
}

TEST_F(XdevTest, ItemAndPrinting) {
  const Tensor z =
      full({1}, Scalar(std::complex<double>(1, 2)), TensorOptions(kComplex64).device(kSim0));
  EXPECT_EQ(z.item().to<std::complex<double>>(), std::complex<double>(1, 2));
  EXPECT_EQ(z.conj().item().to<std::complex<double>>(), std::complex<double>(1, -2));
  EXPECT_EQ(z._neg_view().item().to<std::complex<double>>(), std::complex<double>(-1, -2));
  EXPECT_EQ(arange(5, TensorOptions(kInt64).device(kSim1))[3].item<int64_t>(), 3);
  EXPECT_EQ(arange(4, TensorOptions(kFloat32).device(kSim1)).str(),
            "tensor([0., 1., 2., 3.], device='sim:1')");
  EXPECT_EQ(zeros({2, 2}, TensorOptions(kHalf).device(kSim0)).t().str(),
            "tensor([[0., 0.],\n        [0., 0.]], device='sim:0', dtype=ferry.float16)");
}

TEST_F(XdevTest, FactoriesWithADevice) {
  const TensorOptions on(Device("sim:1"));
  EXPECT_EQ(zeros({3}, on).device(), kSim1);
  const auto values = [](const Tensor& t) {
    const Tensor h = t.cpu().to(kFloat64).contiguous();
    return std::vector<double>(h.data_ptr<double>(), h.data_ptr<double>() + h.numel());
  };
  EXPECT_THAT(values(zeros({3}, on)), ::testing::ElementsAre(0, 0, 0));
  EXPECT_THAT(values(ones({2}, on.dtype(kInt8))), ::testing::ElementsAre(1, 1));
  EXPECT_THAT(values(full({2}, 2.5, on.dtype(kBFloat16))), ::testing::ElementsAre(2.5, 2.5));
  EXPECT_THAT(values(arange(0, 3, 1, on)), ::testing::ElementsAre(0, 1, 2));
  Generator g1(7), g2(7);
  EXPECT_EQ(values(rand({8}, on, &g1)), values(rand({8}, kFloat32, &g2)));
  EXPECT_THAT(values(zeros_like(empty({2}, on))), ::testing::ElementsAre(0, 0));
  EXPECT_EQ(empty_like(empty({2}, on)).device(), kSim1);
}

TEST_F(XdevTest, ToCopiesOnlyWhenSomethingChanges) {
  set_device(kSim0);
  const Tensor x = arange(6, TensorOptions(kFloat32).device(kSim1)).view({2, 3});
  EXPECT_TRUE(x.to(kSim1).is_same(x));
  EXPECT_TRUE(x.to(Device("sim:1"), kFloat32).is_same(x));
  EXPECT_TRUE(x.to(x).is_same(x));
  EXPECT_FALSE(x.to(kSim1, kFloat32, false, /*copy=*/true).is_alias_of(x));
  // An index-less device is the current one (sim:0 here), as for new tensors.
  const Tensor moved = x.to(Device("sim"));
  EXPECT_EQ(moved.device(), kSim0);
  EXPECT_EQ(x.t().to(kSim0).strides(), x.t().strides()) << "a dense layout is preserved";
  const Tensor c = x.cpu();
  EXPECT_TRUE(c.cpu().is_same(c));
  const Tensor p = c.pin_memory();
  EXPECT_TRUE(p.is_pinned());
  EXPECT_TRUE(p.pin_memory().is_same(p));
  EXPECT_TRUE(x.to(TensorOptions(Device("cpu")).pinned_memory(true)).is_pinned());
  const Tensor other = empty({1}, TensorOptions(kFloat64).device(kSim0));
  const Tensor y = x.to(other, /*non_blocking=*/true);
  EXPECT_EQ(y.device(), kSim0);
  EXPECT_EQ(y.dtype(), kFloat64);
  const Tensor yh = y.cpu();
  double sum = 0;
  for (int64_t i = 0; i < 6; ++i) sum += yh.data_ptr<double>()[i];
  EXPECT_EQ(sum, 15.0);
}

std::vector<float> float_values(const Tensor& t) {
  const Tensor h = t.cpu().to(kFloat32).contiguous();
  return std::vector<float>(h.data_ptr<float>(), h.data_ptr<float>() + h.numel());
}

// to(cpu, non_blocking=true) from a device pins the result (as PyTorch's _to_copy does), so the
// copy is only queued: with the device's stream held by a gate the call returns at once, and the
// values are there after a synchronize of that stream. Blocking, or from the host, nothing is
// pinned unless asked.
TEST_F(XdevTest, NonBlockingToCpuPinsTheResult) {
  const Tensor x = arange(0, 600, 1, TensorOptions(kFloat32).device(kSim1)).view({20, 30});
  device_synchronize(kSim1);
  const Stream stream = current_stream(kSim1);
  Tensor same, converted, transposed;
  {
    Gate gate(stream);
    const auto start = std::chrono::steady_clock::now();
    same = x.to(Device("cpu"), kFloat32, /*non_blocking=*/true);       // one memcpy
    converted = x.to(Device("cpu"), kFloat64, /*non_blocking=*/true);  // staged, on sim:1
    transposed = x.t().to(TensorOptions(Device("cpu")), /*non_blocking=*/true, false,
                          MemoryFormat::Contiguous);  // staged, on sim:1
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5))
        << "to(cpu, non_blocking=true) waited for the stream";
  }
  for (const Tensor* t : {&same, &converted, &transposed}) {
    EXPECT_TRUE(t->is_pinned());
    EXPECT_TRUE(t->is_cpu());
  }
  stream.synchronize();
  std::vector<float> want(600);
  for (int i = 0; i < 600; ++i) want[static_cast<size_t>(i)] = static_cast<float>(i);
  EXPECT_EQ(float_values(same), want);
  EXPECT_EQ(float_values(converted), want);
  EXPECT_EQ(DimVector(transposed.strides()), (DimVector{20, 1}));
  EXPECT_EQ(float_values(transposed), float_values(x.t()));
  EXPECT_FALSE(x.to(Device("cpu")).is_pinned()) << "blocking: pageable, as asked";
  EXPECT_FALSE(x.cpu().is_pinned());
  EXPECT_FALSE(arange(3).to(kFloat64, /*non_blocking=*/true).is_pinned()) << "from the host";
  EXPECT_TRUE(x.to(TensorOptions(Device("cpu")).pinned_memory(true)).is_pinned());
}

// to()'s memory_format between every pair of devices: the result has the format's strides (or,
// for preserve, the source's dense layout) and the source's values.
TEST_F(XdevTest, ToWithAMemoryFormatAcrossDevices) {
  const Device devices[] = {Device("cpu"), kSim0, kSim1};
  const std::vector<int64_t> sizes = {2, 3, 4, 5};
  for (Device from : devices) {
    for (Device to : devices) {
      for (bool permuted : {false, true}) {
        const Tensor values = arange(0, 120, 1, kFloat32);
        const Tensor host =
            permuted ? values.view({2, 4, 5, 3}).permute({0, 3, 1, 2}) : values.view({2, 3, 4, 5});
        const Tensor x = place(host, from);
        for (MemoryFormat format :
             {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast, MemoryFormat::Preserve}) {
          SCOPED_TRACE(::testing::Message() << from << " -> " << to << ", " << format
                                            << (permuted ? ", channels-last source" : ""));
          for (bool non_blocking : {false, true}) {
            const Tensor y = x.to(TensorOptions(to), non_blocking, false, format);
            device_synchronize(from);
            device_synchronize(to);
            EXPECT_EQ(y.device(), to);
            const DimVector want = format == MemoryFormat::Preserve
                                       ? DimVector(x.strides())
                                       : strides_for_memory_format(sizes, format);
            EXPECT_EQ(DimVector(y.strides()), want);
            EXPECT_EQ(y.is_same(x), from == to && y.strides().equals(x.strides()))
                << "a copy exactly when something changes";
            EXPECT_EQ(float_values(y), float_values(x));
          }
        }
      }
    }
  }
  // A format that does not fit the rank is refused, whatever the devices.
  const Tensor v = zeros({2, 3, 4, 5}, TensorOptions().device(kSim0));
  EXPECT_THROW(v.to(TensorOptions(Device("cpu")), false, false, MemoryFormat::ChannelsLast3d),
               ShapeError);
  EXPECT_THROW(v.to(TensorOptions(kSim1), true, false, MemoryFormat::ChannelsLast3d), ShapeError);
}

TEST_F(XdevTest, PartlyOverlappingDeviceCopy) {
  Tensor x = arange(10, TensorOptions(kFloat32).device(kSim0));
  x.slice(0, 1, 10).copy_(x.slice(0, 0, 9));
  const Tensor h = x.cpu();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(h.data_ptr<float>()[i], i == 0 ? 0 : i - 1);
}

// Which path, and which temporaries, for chosen copies (the decision table).
TEST_F(XdevTest, TheTemporariesDecision) {
  const TensorOptions f32(kFloat32);
  const Tensor host = empty({64, 32}, f32);
  const Tensor d0 = empty({64, 32}, f32.device(kSim0));
  const Tensor d1 = empty({64, 32}, f32.device(kSim1));
  const auto plan = [](const Tensor& dst, const Tensor& src, bool nb = false) {
    return plan_device_copy(dst, src, nb);
  };
  // Same device: never temporaries.
  EXPECT_EQ(plan(d0, d0.to(kSim0, kFloat64)).path, DeviceCopyPath::kKernel);
  EXPECT_EQ(plan(d0.t(), empty({32, 64}, f32.device(kSim0))).path, DeviceCopyPath::kKernel);
  // Dense, same dtype: one memcpy, whatever the devices.
  EXPECT_EQ(plan(d0, host).path, DeviceCopyPath::kMemcpy);
  EXPECT_EQ(plan(host, d1).path, DeviceCopyPath::kMemcpy);
  EXPECT_EQ(plan(d1, d0).path, DeviceCopyPath::kMemcpy);
  EXPECT_EQ(plan(d0.t(), empty({64, 32}, f32).t()).path, DeviceCopyPath::kMemcpy);
  // Two devices with peer access: the kernel reads the peer.
  const DeviceCopyPlan peer = plan(d1, d0.to(kFloat16));
  EXPECT_EQ(peer.path, DeviceCopyPath::kPeerKernel);
  EXPECT_TRUE(peer.peer);
  // Host to device, converting: moved as it is, converted on the device.
  const DeviceCopyPlan h2d = plan(d0, empty({64, 32}, kFloat64));
  EXPECT_EQ(h2d.path, DeviceCopyPath::kStaged);
  EXPECT_EQ(h2d.side, StagingSide::kDestination);
  EXPECT_FALSE(h2d.src_temporary);
  EXPECT_TRUE(h2d.dst_temporary);
  // Device to host, converting: on the host when blocking, on the device when not.
  const Tensor h64 = empty({64, 32}, kFloat64);
  EXPECT_EQ(plan(h64, d0).side, StagingSide::kDestination);
  EXPECT_EQ(plan(h64, d0, true).side, StagingSide::kSource);
  EXPECT_FALSE(plan(h64, d0, true).dst_temporary);
  // A non-dense destination gets a dense temporary and a copy back.
  const DeviceCopyPlan back = plan(empty({64, 64}, f32).slice(1, 0, 64, 2), d0.to(kFloat64), true);
  EXPECT_EQ(back.side, StagingSide::kSource);
  EXPECT_TRUE(back.dst_temporary);
  // A broadcast source crosses once: 32 elements, not 2048.
  const DeviceCopyPlan bcast = plan(d0, empty({32}, kFloat64).expand({64, 32}));
  EXPECT_EQ(bcast.side, StagingSide::kDestination);
  EXPECT_EQ(bcast.bytes_moved, 32 * 8);
  // Without peer access, a device-to-device conversion is staged on the cheaper side.
  sim::SimConfig c;
  c.peer_mode = sim::SimConfig::PeerMode::kNone;
  sim::configure(c);
  const DeviceCopyPlan staged = plan(d1, d0.to(kFloat64));
  EXPECT_EQ(staged.path, DeviceCopyPath::kStaged);
  EXPECT_FALSE(staged.peer);
  EXPECT_EQ(staged.side, StagingSide::kSource) << staged.describe();  // 4-byte elements cross
  EXPECT_EQ(plan(d1.to(kFloat64), d0).side, StagingSide::kDestination);
  EXPECT_THAT(staged.describe(), HasSubstr("staged from sim:0 to sim:1"));
}

TEST_F(XdevTest, DevicesThatDoNotExist) {
  if (device_count(DeviceType::CUDA) == 0) {
    try {
      empty({2}, TensorOptions().device(Device("cuda:0")));
      ADD_FAILURE() << "expected an error for a CUDA tensor without a GPU";
    } catch (const DeviceError& e) {
      // "no CUDA device" with the runtime's reason, or "no cuda device" when not built.
      EXPECT_THAT(e.what(), ::testing::StartsWith("cuda:0: no "));
      EXPECT_THAT(e.what(), HasSubstr(" device (" + device_unavailable_reason(DeviceType::CUDA)));
    }
    EXPECT_THROW(arange(3).to(Device("cuda:0")), DeviceError);
    EXPECT_THROW(arange(3).to(Device("cuda")), DeviceError);
  }
  try {
    arange(3).to(Device("sim:5"));
    ADD_FAILURE() << "expected an error for sim:5";
  } catch (const DeviceError& e) {
    EXPECT_THAT(e.what(), HasSubstr("sim:5: expected a device index below 2"));
  }
  EXPECT_THROW(zeros({2}, TensorOptions().device(Device("sim:2"))), DeviceError);
  // Two device types in one copy: refused with a way out.
  if (device_count(DeviceType::CUDA) > 0) {
    Tensor c = empty({2}, TensorOptions().device(Device("cuda:0")));
    EXPECT_THROW(c.copy_(empty({2}, TensorOptions().device(kSim0))), NotImplementedError);
  }
  EXPECT_THROW(plan_device_copy(empty({2}), empty({2}), false), Error);
}

}  // namespace
}  // namespace ferry::testing
