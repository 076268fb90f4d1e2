// copy_ between every pair of cpu, sim:0 and sim:1 (CUDA pairs when a GPU is present), over
// random shapes, strides (permutes, stepped slices, offsets), expanded sources, all 14 dtypes
// and the conj/neg bits, with peer access on and off, blocking and not, pageable and pinned host
// memory. The expected bytes come from the naive oracle (tests/ops/naive_copy.h) applied to
// snapshots read back with raw backend copies, so nothing under test computes them.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ferry/ops/device_copy.h"
#include "tests/ops/naive_copy.h"
#include "tests/support/random.h"
#include "tests/xdev/xdev_util.h"

namespace ferry::testing {
namespace {

constexpr std::array<ScalarType, 14> kAllDtypes = {
    kBool,     kUInt8,   kInt8,    kInt16,     kInt32,      kInt64,         kFloat16,
    kBFloat16, kFloat32, kFloat64, kComplex64, kComplex128, kFloat8_e4m3fn, kFloat8_e5m2};

std::vector<int64_t> random_sizes(std::mt19937_64& rng) {
  const int rank = static_cast<int>(rng() % 5);
  std::vector<int64_t> sizes;
  for (int d = 0; d < rank; ++d) sizes.push_back(1 + static_cast<int64_t>(rng() % 7));
  return sizes;
}

Tensor with_random_bits(Tensor t, std::mt19937_64& rng) {
  if (t.is_complex() && rng() % 3 == 0) t = t.conj();
  if (rng() % 4 == 0) t = t._neg_view();
  return t;
}

// Allocations made while it is in scope: pageable host memory (a counting CPU allocator is
// installed for the scope), pinned host blocks and device blocks (the allocators' statistics).
class AllocationCounter final : public Allocator {
 public:
  explicit AllocationCounter(std::vector<Device> devices) : devices_(std::move(devices)) {
    for (Device d : devices_) device_base_.push_back(memory::stats(d).allocation.allocated);
    pinned_base_ = memory::pinned_stats().allocation.allocated;
    previous_ = set_allocator(DeviceType::CPU, this);
  }
  AllocationCounter(const AllocationCounter&) = delete;
  AllocationCounter& operator=(const AllocationCounter&) = delete;
  ~AllocationCounter() override { set_allocator(DeviceType::CPU, previous_); }

  DataPtr allocate(size_t nbytes, Device device) override {
    pageable_.fetch_add(1);
    return previous_->allocate(nbytes, device);
  }
  int64_t pageable() const { return pageable_.load(); }
  int64_t pinned() const { return memory::pinned_stats().allocation.allocated - pinned_base_; }
  int64_t on(Device device) const {
    for (size_t i = 0; i < devices_.size(); ++i) {
      if (devices_[i] == device) {
        return memory::stats(device).allocation.allocated - device_base_[i];
      }
    }
    ADD_FAILURE() << device << " is not counted";
    return -1;
  }

 private:
  std::vector<Device> devices_;
  std::vector<int64_t> device_base_;
  int64_t pinned_base_ = 0;
  Allocator* previous_ = nullptr;
  std::atomic<int64_t> pageable_{0};
};

// The temporaries `plan` says the copy makes on `device` (cpu: host temporaries). In pieces, a
// host temporary is one pinned block per piece and a device temporary one block of the whole.
int64_t planned_temporaries(const DeviceCopyPlan& plan, Device device) {
  if (plan.path != DeviceCopyPath::kStaged) return 0;
  const auto count = [&](bool temporary, Device at) -> int64_t {
    if (!temporary || at != device) return 0;
    return at.is_cpu() ? plan.pieces : 1;
  };
  return count(plan.src_temporary, plan.src_device) + count(plan.dst_temporary, plan.dst_device);
}

// For the scope: staged copies move in pieces of `bytes` (a few bytes reach the pieces path with
// the small tensors of these tests).
class PieceBytes {
 public:
  explicit PieceBytes(int64_t bytes) : previous_(set_staged_piece_bytes(bytes)) {}
  PieceBytes(const PieceBytes&) = delete;
  PieceBytes& operator=(const PieceBytes&) = delete;
  ~PieceBytes() { set_staged_piece_bytes(previous_); }

 private:
  int64_t previous_;
};

// For the scope: the pool runs one thread, which lets the sim cut copies whose strided step runs
// on a side stream into pieces (with more, the step and the sim's transfers contend for the
// CPUs, and the plan keeps them whole).
class OnePoolThread {
 public:
  OnePoolThread() : previous_(get_num_threads()) { set_num_threads(1); }
  OnePoolThread(const OnePoolThread&) = delete;
  OnePoolThread& operator=(const OnePoolThread&) = delete;
  ~OnePoolThread() { set_num_threads(previous_); }

 private:
  int previous_;
};

struct Coverage {
  std::map<std::string, int> paths;
  void add(const DeviceCopyPlan& plan) {
    std::string key = device_copy_path_name(plan.path);
    if (plan.path == DeviceCopyPath::kStaged)
      key += std::string("/") + staging_side_name(plan.side);
    ++paths[key];
    if (plan.pieces > 1) {
      ++paths["staged in pieces"];
      ++paths[std::string("pieces, ") + (plan.src_temporary ? "packed" : "scattered") + " on " +
              (plan.pieces_on_side_stream ? "a side stream" : "the calling thread")];
    }
  }
};

// One random copy from src_device to dst_device, checked against the oracle. `for_pieces`: a
// copy in pieces of a few bytes whose values move unchanged, or with a conversion, between a
// pageable or pinned host tensor and a device (the copies a plan cuts into pieces, when they
// are staged with one strided step).
void random_copy(std::mt19937_64& rng, Device dst_device, Device src_device, Coverage& coverage,
                 bool for_pieces = false) {
  std::vector<int64_t> sizes = random_sizes(rng);
  if (for_pieces) sizes.insert(sizes.begin(), {2 + int64_t(rng() % 5), 2 + int64_t(rng() % 5)});
  const bool plain = !for_pieces && rng() % 4 == 0;  // dense, same dtype, same bits: a memcpy
  // A third of the others keep the values too (any layouts): staged copies that only move.
  const bool same_values = plain || (for_pieces ? rng() % 2 == 0 : rng() % 3 == 0);
  const ScalarType dst_dtype = kAllDtypes[rng() % kAllDtypes.size()];
  const ScalarType src_dtype = same_values ? dst_dtype : kAllDtypes[rng() % kAllDtypes.size()];
  const bool broadcast = !plain && rng() % 3 == 0;
  // (In pieces, mostly dense destinations: a non-dense one makes a second strided step.)
  const bool dense_dst = plain || (for_pieces ? rng() % 3 != 0 : rng() % 3 == 0);
  Tensor dst_h = random_view(rng, sizes, dst_dtype, false, dense_dst);
  Tensor src_h = random_view(rng, sizes, src_dtype, broadcast,
                             plain || (for_pieces ? rng() % 5 == 0 : rng() % 3 == 0));
  if (!same_values) {
    dst_h = with_random_bits(dst_h, rng);
    src_h = with_random_bits(src_h, rng);
  }
  fill_random(dst_h, rng);
  fill_random(src_h, rng);
  const bool pinned = rng() % 2 == 0;
  const bool non_blocking = rng() % 2 == 0;
  // Half of the copies move staged sources in pieces of 1 to 64 bytes, the others at the default.
  const PieceBytes piece_bytes(for_pieces || rng() % 2 == 0 ? 1 + static_cast<int64_t>(rng() % 64)
                                                            : staged_piece_bytes());
  Tensor dst = place(dst_h, dst_device, pinned);
  const Tensor src = place(src_h, src_device, pinned);
  std::vector<uint8_t> dst_before = read_storage(dst);
  std::vector<uint8_t> src_before = read_storage(src);
  SCOPED_TRACE(::testing::Message()
               << src_device << " -> " << dst_device << ", sizes " << IntArrayRef(sizes) << ", "
               << src_dtype << " (strides " << src.strides() << (src.is_conj() ? ", conj" : "")
               << (src.is_neg() ? ", neg" : "") << ") -> " << dst_dtype << " (strides "
               << dst.strides() << (dst.is_conj() ? ", conj" : "") << (dst.is_neg() ? ", neg" : "")
               << "), " << (pinned ? "pinned" : "pageable") << ", "
               << (non_blocking ? "non-blocking" : "blocking") << ", pieces of "
               << staged_piece_bytes() << " bytes");
  const bool device_copy = !dst_device.is_cpu() || !src_device.is_cpu();
  DeviceCopyPlan plan;
  if (device_copy) {
    plan = plan_device_copy(dst, src, non_blocking);
    coverage.add(plan);
  }
  std::vector<Device> devices;
  for (Device d : {dst_device, src_device}) {
    if (!d.is_cpu() && (devices.empty() || devices[0] != d)) devices.push_back(d);
  }
  std::vector<uint8_t> after;
  {
    const AllocationCounter counter(devices);
    dst.copy_(src, non_blocking);
    // A blocking copy to the host is finished when copy_ returns: read it before anything
    // synchronizes (the sim's latency or chaos makes an early read see the old bytes).
    if (dst_device.is_cpu() && !non_blocking) after = read_storage(dst);
    // Temporaries exactly when the plan says, where it says.
    for (Device d : devices) {
      EXPECT_EQ(counter.on(d), planned_temporaries(plan, d)) << "device blocks on " << d;
    }
    const int64_t host_temporaries = planned_temporaries(plan, Device(DeviceType::CPU));
    if (host_temporaries > 0) {
      EXPECT_EQ(plan.pinned_host_temporaries, pinned) << "host temporaries are pinned exactly "
                                                         "when the host tensor is";
    }
    if (plan.pieces > 1) {
      EXPECT_NE(plan.src_temporary, plan.dst_temporary)
          << "pieces only with one strided step beside the move; " << plan.describe();
      const Device work = plan.src_temporary ? src_device : dst_device;
      EXPECT_EQ(plan.pieces_on_side_stream, !work.is_cpu() || pinned)
          << "the calling thread does only host work on pageable memory; " << plan.describe();
      EXPECT_TRUE(!plan.pieces_on_side_stream || get_num_threads() == 1 ||
                  !get_backend(plan.piece_device.type()).runs_on_host_cpus())
          << "on the sim, side streams take pieces only with a pool of one thread; "
          << plan.describe();
    }
    const bool pinned_blocks = plan.pinned_host_temporaries || plan.pieces > 1;
    EXPECT_EQ(counter.pinned(), pinned_blocks ? host_temporaries : 0) << "pinned host blocks";
    EXPECT_EQ(counter.pageable(), pinned_blocks ? 0 : host_temporaries)
        << "pageable host allocations";
  }
  for (Device d : {dst_device, src_device}) device_synchronize(d);
  if (after.empty()) after = read_storage(dst);
  const Tensor dst_m = host_mirror(dst, after);
  const Tensor src_m = host_mirror(src, src_before);
  ASSERT_TRUE(check_copy(dst_m, src_m, dst_before, src_before));
  EXPECT_EQ(read_storage(src), src_before) << "the source was written";
}

struct PairParam {
  const char* dst;
  const char* src;
  bool peer;
};

void PrintTo(const PairParam& p, std::ostream* out) {
  *out << p.src << " -> " << p.dst << (p.peer ? "" : ", no peer access");
}

class DevicePairs : public XdevTest, public ::testing::WithParamInterface<PairParam> {
 protected:
  sim::SimConfig config() const override {
    sim::SimConfig c;
    c.peer_mode =
        GetParam().peer ? sim::SimConfig::PeerMode::kAll : sim::SimConfig::PeerMode::kNone;
    // Device-to-host copies finish late: a blocking copy that returned before its last step
    // shows as old bytes in the destination.
    c.latency[static_cast<size_t>(sim::Link::DeviceToHost)] = std::chrono::microseconds(200);
    return c;
  }
};

TEST_P(DevicePairs, RandomCopiesMatchTheOracle) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const Device dst(GetParam().dst);
  const Device src(GetParam().src);
  Coverage coverage;
  for (int i = 0; i < 150; ++i) {
    random_copy(rng, dst, src, coverage);
    if (HasFatalFailure()) return;
  }
  if (dst.is_cpu() && src.is_cpu()) return;
  std::string seen;
  for (const auto& [path, n] : coverage.paths) seen += path + ": " + std::to_string(n) + "; ";
  RecordProperty("paths", seen);
  // Every case this pair can take was taken (plain copies are a quarter of the cases).
  EXPECT_GT(coverage.paths["memcpy"], 0);
  if (dst == src) {
    EXPECT_GT(coverage.paths["kernel"], 0);
  }
  const bool two_devices = !dst.is_cpu() && !src.is_cpu() && dst != src;
  if (two_devices && GetParam().peer) {
    EXPECT_GT(coverage.paths["peer kernel"], 0);
  }
  if (dst != src && !(two_devices && GetParam().peer)) {
    EXPECT_GT(coverage.paths["staged/source"] + coverage.paths["staged/destination"], 0);
  }
}

std::vector<PairParam> all_pairs() {
  std::vector<PairParam> out;
  const char* devices[] = {"cpu", "sim:0", "sim:1"};
  for (const char* d : devices) {
    for (const char* s : devices) {
      const bool cross_sim =
          std::string(d) != s && std::string(d) != "cpu" && std::string(s) != "cpu";
      out.push_back({d, s, true});
      if (cross_sim) out.push_back({d, s, false});
    }
  }
  return out;
}

std::string pair_name(const ::testing::TestParamInfo<PairParam>& info) {
  std::string name =
      std::string(info.param.src) + "_to_" + info.param.dst + (info.param.peer ? "" : "_no_peer");
  for (char& c : name) {
    if (c == ':') c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Xdev, DevicePairs, ::testing::ValuesIn(all_pairs()), pair_name);

// Under chaos, with random current streams (default or pool) per device: every internal step
// of every path must be ordered by the streams themselves.
class ChaosPairs : public XdevTest {
 protected:
  sim::SimConfig config() const override {
    sim::SimConfig c;
    c.chaos_seed = test_seed();
    c.chaos_max_delay = std::chrono::microseconds(200);
    return c;
  }
};

TEST_F(ChaosPairs, RandomCopiesWithRandomCurrentStreams) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const Device devices[] = {Device("cpu"), kSim0, kSim1};
  Coverage coverage;
  for (int i = 0; i < 120; ++i) {
    for (Device d : {kSim0, kSim1}) {
      set_current_stream(rng() % 2 == 0 ? default_stream(d) : get_stream_from_pool(d));
    }
    if (i == 60) {
      sim::SimConfig c = config();
      c.peer_mode = sim::SimConfig::PeerMode::kNone;
      sim::configure(c);
    }
    const Device dst = devices[rng() % 3];
    const Device src = devices[rng() % 3];
    random_copy(rng, dst, src, coverage);
    if (HasFatalFailure()) return;
  }
}

// Copies between the host (pageable and pinned) and either device, and between the two
// devices without peer access, in pieces of a few bytes, under chaos with random current
// streams: every copy matches the oracle, makes the temporaries its plan names (random_copy
// checks), and every kind of piece (packed or scattered, on the calling thread or on a side
// stream) is taken.
TEST_F(ChaosPairs, StagedCopiesMoveInPieces) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  sim::SimConfig c = config();
  c.peer_mode = sim::SimConfig::PeerMode::kNone;
  sim::configure(c);
  const OnePoolThread one_thread;
  const std::pair<Device, Device> pairs[] = {// {dst, src}
                                             {kSim0, Device("cpu")}, {kSim1, Device("cpu")},
                                             {Device("cpu"), kSim0}, {Device("cpu"), kSim1},
                                             {kSim1, kSim0},         {kSim0, kSim1}};
  Coverage coverage;
  for (int i = 0; i < 360; ++i) {
    const auto [dst, src] = pairs[rng() % std::size(pairs)];
    for (Device d : {kSim0, kSim1}) {
      set_current_stream(rng() % 2 == 0 ? default_stream(d) : get_stream_from_pool(d));
    }
    random_copy(rng, dst, src, coverage, /*for_pieces=*/true);
    if (HasFatalFailure()) return;
  }
  std::string seen;
  for (const auto& [path, n] : coverage.paths) seen += path + ": " + std::to_string(n) + "; ";
  SCOPED_TRACE(seen);
  RecordProperty("paths", seen);
  EXPECT_GT(coverage.paths["staged in pieces"], 60) << "copies cut into pieces, of 360";
  for (const char* kind :
       {"pieces, packed on the calling thread", "pieces, packed on a side stream",
        "pieces, scattered on the calling thread", "pieces, scattered on a side stream"}) {
    EXPECT_GT(coverage.paths[kind], 0) << kind;
  }
}

// A transposed copy between the host and a device, or between devices without peer access,
// goes in pieces: the plan says how many, along which dimension and where the strided step
// runs, describe() shows it, and the values land whole, blocking or not.
TEST_F(XdevTest, TransposedCopiesMoveInPieces) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  sim::SimConfig c = config();
  c.peer_mode = sim::SimConfig::PeerMode::kNone;
  sim::configure(c);
  const PieceBytes piece_bytes(64 * 1024);
  const OnePoolThread one_thread;
  Tensor base = empty({512, 384}, kFloat32);
  fill_random(base, rng);
  const std::vector<uint8_t> expected = read_storage(base.t().contiguous());
  struct Case {
    const char* name;
    Device src_device, dst_device;
    bool pinned;
    bool pack;         // else scattered
    const char* lane;  // in describe()
  };
  const Case cases[] = {
      {"h2d pageable", Device("cpu"), kSim0, false, true, "on the calling thread"},
      {"h2d pinned", Device("cpu"), kSim0, true, true, "on a side stream of sim:0"},
      {"d2h", kSim0, Device("cpu"), false, true, "on a side stream of sim:0"},
      {"sim:0 to sim:1, no peer access", kSim0, kSim1, false, true, "on a side stream of sim:0"},
  };
  for (const Case& k : cases) {
    for (const bool non_blocking : {false, true}) {
      SCOPED_TRACE(::testing::Message() << k.name << (non_blocking ? ", non-blocking" : ""));
      const Tensor src = place(base, k.src_device, k.pinned).t();  // [384, 512], 768 KiB
      Tensor dst = place(empty({384, 512}, kFloat32), k.dst_device, k.pinned);
      const DeviceCopyPlan plan = plan_device_copy(dst, src, non_blocking);
      EXPECT_EQ(plan.pieces, 12) << plan.describe();  // of 64 KiB, along dim 0
      EXPECT_EQ(plan.piece_dim, 0) << plan.describe();
      EXPECT_EQ(plan.src_temporary, k.pack) << plan.describe();
      EXPECT_NE(plan.describe().find("in 12 pieces along dim 0: each packed"), std::string::npos)
          << plan.describe();
      EXPECT_NE(plan.describe().find(k.lane), std::string::npos) << plan.describe();
      dst.copy_(src, non_blocking);
      for (Device d : {kSim0, kSim1}) device_synchronize(d);
      EXPECT_EQ(read_storage(dst), expected);
    }
  }
  // A converting copy to pageable host memory, blocking: the host scatters (and converts) each
  // piece while the next one moves; to pinned memory, a side stream does.
  for (const bool pinned : {false, true}) {
    SCOPED_TRACE(pinned ? "d2h converting, pinned" : "d2h converting, pageable");
    const Tensor src = place(base, kSim0, false).t();
    Tensor dst = place(empty({384, 512}, kFloat64), Device("cpu"), pinned);
    const DeviceCopyPlan plan = plan_device_copy(dst, src, /*non_blocking=*/false);
    EXPECT_EQ(plan.side, StagingSide::kDestination) << plan.describe();
    EXPECT_EQ(plan.pieces, 12) << plan.describe();
    EXPECT_EQ(plan.piece_dim, 1) << plan.describe();  // the source's outermost in memory
    EXPECT_NE(plan.describe().find(pinned ? "scattered while the next moves, on a side stream"
                                          : "scattered while the next moves, on the calling"),
              std::string::npos)
        << plan.describe();
    dst.copy_(src);
    EXPECT_EQ(read_storage(dst), read_storage(base.t().contiguous().to(kFloat64)));
  }
  // With two pool threads the sim keeps side-stream work whole; the calling thread's pieces stay.
  set_num_threads(2);
  const Tensor host_t = base.t();
  const Tensor pinned_t = place(base, Device("cpu"), true).t();
  const Tensor device_t = place(base, kSim0, false).t();
  Tensor on_device = place(empty({384, 512}, kFloat32), kSim0);
  Tensor on_host = empty({384, 512}, kFloat32);
  EXPECT_EQ(plan_device_copy(on_device, host_t, false).pieces, 12);
  EXPECT_EQ(plan_device_copy(on_device, pinned_t, false).pieces, 1);
  EXPECT_EQ(plan_device_copy(on_host, device_t, false).pieces, 1);
}

// Copies large enough for the CPU engine to split its work across threads, inside a sim
// stream's worker (the kernel) and on the host.
TEST_F(XdevTest, LargeThreadedCopies) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  const Device devices[] = {Device("cpu"), kSim0, kSim1};
  for (Device dst_device : devices) {
    for (Device src_device : devices) {
      if (dst_device.is_cpu() && src_device.is_cpu()) continue;
      Tensor dst_h = empty({300, 301}, kFloat32);
      Tensor src_h = empty({301, 300}, kFloat64).t();
      fill_random(dst_h, rng);
      fill_random(src_h, rng);
      Tensor dst = place(dst_h, dst_device);
      const Tensor src = place(src_h, src_device);
      std::vector<uint8_t> dst_before = read_storage(dst);
      std::vector<uint8_t> src_before = read_storage(src);
      dst.copy_(src, rng() % 2 == 0);
      for (Device d : {dst_device, src_device}) device_synchronize(d);
      std::vector<uint8_t> after = read_storage(dst);
      SCOPED_TRACE(::testing::Message() << src_device << " -> " << dst_device);
      ASSERT_TRUE(check_copy(host_mirror(dst, after), host_mirror(src, src_before), dst_before,
                             src_before));
    }
  }
}

// The same on CUDA devices: skipped with the runtime's reason on machines without a GPU.
TEST(CudaPairs, RandomCopiesMatchTheOracle) {
  if (device_count(DeviceType::CUDA) == 0) {
    GTEST_SKIP() << "no CUDA device (" << device_unavailable_reason(DeviceType::CUDA) << ")";
  }
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  std::vector<Device> devices = {Device("cpu")};
  for (int i = 0; i < std::min(device_count(DeviceType::CUDA), 2); ++i) {
    devices.push_back(Device(DeviceType::CUDA, static_cast<DeviceIndex>(i)));
  }
  Coverage coverage;
  for (Device d : devices) {
    for (Device s : devices) {
      if (d.is_cpu() && s.is_cpu()) continue;
      for (int i = 0; i < 30; ++i) {
        random_copy(rng, d, s, coverage);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// to() reaches the same path: to(device, dtype) and back hold the oracle's conversion of x.
TEST_F(XdevTest, ToDeviceAndBackMatchesTheCpuConversion) {
  SCOPED_TRACE(seed_trace());
  auto rng = test_rng();
  for (int i = 0; i < 40; ++i) {
    const std::vector<int64_t> sizes = random_sizes(rng);
    const ScalarType from = kAllDtypes[rng() % kAllDtypes.size()];
    const ScalarType to = kAllDtypes[rng() % kAllDtypes.size()];
    Tensor x = with_random_bits(random_view(rng, sizes, from, rng() % 3 == 0), rng);
    fill_random(x, rng);
    const bool non_blocking = rng() % 2 == 0;
    const Device device = rng() % 2 == 0 ? kSim0 : kSim1;
    const Tensor on_device = x.to(device, to, non_blocking);
    EXPECT_EQ(on_device.device(), device);
    EXPECT_EQ(on_device.dtype(), to);
    EXPECT_FALSE(on_device.is_conj() || on_device.is_neg());
    const Tensor back = on_device.to(Device("cpu"), to, non_blocking);
    device_synchronize(device);
    EXPECT_TRUE(on_device.is_non_overlapping_and_dense());
    if (x.is_non_overlapping_and_dense()) {
      EXPECT_EQ(on_device.strides(), x.strides());
    }
    EXPECT_EQ(back.strides(), on_device.strides());
    std::vector<uint8_t> got = read_storage(back);
    std::vector<uint8_t> x_bytes = read_storage(x);
    SCOPED_TRACE(::testing::Message()
                 << from << " -> " << to << " sizes " << x.sizes() << " strides " << x.strides());
    ASSERT_TRUE(check_copy(host_mirror(back, got), host_mirror(x, x_bytes),
                           std::vector<uint8_t>(got.size(), 0), x_bytes));
  }
}

}  // namespace
}  // namespace ferry::testing
