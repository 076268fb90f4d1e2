// safetensors::save and load: round trips of every dtype through every load path (mapped,
// pinned, pageable, sim device with and without chaos, O_DIRECT), zero-size and 0-d tensors,
// metadata, the mapping's lifetime, the pinned block's storages and events, unaligned data, the
// progress callback and bar, and save's all-or-nothing file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "ferry/ferry.h"
#include "ferry/nn/progress.h"
#include "ferry/nn/safetensors.h"
#include "tests/memory/memory_fixture.h"
#include "tests/nn/safetensors_test_util.h"
#include "tests/support/errors.h"
#include "tests/support/random.h"
#include "tests/support/tensor_compare.h"

namespace ferry::testing {
namespace {

using ::testing::HasSubstr;
namespace st = safetensors;

const std::vector<ScalarType> kAllDtypes = {kFloat64,       kFloat32,     kFloat16, kBFloat16,
                                            kFloat8_e4m3fn, kFloat8_e5m2, kInt64,   kInt32,
                                            kInt16,         kInt8,        kUInt8,   kBool};

Tensor random_tensor(ScalarType dtype, std::vector<int64_t> shape) {
  if (dtype == kBool) return randint(0, 2, shape).to(kBool);
  if (is_floating_point(dtype)) return randn(shape).to(dtype);
  return randint(dtype == kUInt8 ? 0 : -100, 100, shape, TensorOptions(dtype));
}

// The tensor's bytes, contiguous, on the host.
std::string bytes_of(const Tensor& t) {
  const Tensor h = t.cpu().contiguous();
  return std::string(static_cast<const char*>(h.data_ptr()), h.nbytes());
}

TensorDict every_dtype() {
  TensorDict d;
  int i = 0;
  for (ScalarType t : kAllDtypes) {
    d.insert("t" + std::to_string(i++) + "." + std::string(*st::dtype_code(t)),
             random_tensor(t, {3, 5}));
  }
  d.insert("scalar", full({}, 2.5, kFloat32));
  d.insert("empty", empty({0, 4}, kFloat16));
  d.insert("nothing", empty({0}, kInt64));
  return d;
}

void expect_same(const TensorDict& saved, const TensorDict& loaded) {
  ASSERT_EQ(saved.size(), loaded.size());
  for (const auto& item : saved) {
    const Tensor* got = loaded.find(item.key());
    ASSERT_NE(got, nullptr) << item.key();
    EXPECT_EQ(got->dtype(), item.value().dtype()) << item.key();
    EXPECT_EQ(got->sizes(), item.value().sizes()) << item.key();
    EXPECT_TRUE(got->is_contiguous()) << item.key();
    EXPECT_EQ(bytes_of(*got), bytes_of(item.value())) << item.key();
  }
}

class SafetensorsLoadTest : public MemoryTest {};

TEST_F(SafetensorsLoadTest, RoundTripsEveryDtypeThroughEveryPath) {
  const std::string path = scratch_path("all.safetensors");
  const TensorDict saved = every_dtype();
  st::save(path, saved, {{"format", "pt"}, {"note", "ünïcode"}});
  const std::vector<std::pair<const char*, st::LoadOptions>> paths = {
      {"mapped", {}},
      {"pinned", {.host_memory = st::HostMemory::kPinned}},
      {"pageable", {.host_memory = st::HostMemory::kPageable}},
      {"sim", {.device = kSim0}},
      {"sim small chunks", {.device = kSim1, .staging_chunks = 2, .chunk_bytes = 4096}},
      {"sim non-blocking", {.device = kSim0, .non_blocking = true}},
  };
  for (const auto& [name, options] : paths) {
    SCOPED_TRACE(name);
    const st::LoadedTensors loaded = st::load(path, options);
    EXPECT_EQ(loaded.metadata.at("note"), "ünïcode");
    for (const auto& item : loaded)
      EXPECT_EQ(item.value().device(), checked_device(options.device));
    expect_same(saved, loaded);
  }
  // The file order is the writer's: largest alignment first, then names.
  const st::LoadedTensors loaded = st::load(path);
  EXPECT_EQ(loaded[0].key(), "nothing");  // int64
  EXPECT_EQ(loaded[1].key(), "t6.I64");
  EXPECT_EQ(loaded[2].key(), "t0.F64");
  EXPECT_EQ(st::read_header(path).tensors.size(), saved.size());
}

TEST_F(SafetensorsLoadTest, SavesViewsDeviceTensorsAndLazyBits) {
  const std::string path = scratch_path("views.safetensors");
  const Tensor base = randn({6, 4});
  TensorDict d;
  d.insert("t", base.t());
  d.insert("slice", base.slice(0, 1, 5, 2));
  d.insert("dev", base.to(kSim0));
  d.insert("neg", base._neg_view());
  d.insert("expanded", full({1}, 3.0).expand({5}));
  st::save(path, d);
  const st::LoadedTensors loaded = st::load(path);
  EXPECT_EQ(bytes_of(loaded["t"]), bytes_of(base.t().contiguous()));
  EXPECT_EQ(bytes_of(loaded["slice"]), bytes_of(base.slice(0, 1, 5, 2).contiguous()));
  EXPECT_EQ(bytes_of(loaded["dev"]), bytes_of(base));
  EXPECT_EQ(bytes_of(loaded["neg"]), bytes_of(base.neg()));
  EXPECT_EQ(bytes_of(loaded["expanded"]), bytes_of(full({5}, 3.0)));
}

TEST_F(SafetensorsLoadTest, SaveRefusesWhatTheFormatCannotHoldAndLeavesNoFile) {
  const std::string path = scratch_path("refused.safetensors");
  TensorDict complex_dict;
  complex_dict.insert("ok", ones({2}));
  complex_dict.insert("c", empty({2}, kComplex64));
  EXPECT_THAT(error_of<DTypeError>([&] { st::save(path, complex_dict); }),
              HasSubstr("tensor 'c': dtype Complex64 has no safetensors name"));
  TensorDict reserved;
  reserved.insert("__metadata__", ones({2}));
  EXPECT_THAT(error_of([&] { st::save(path, reserved); }), HasSubstr("\"__metadata__\""));
  TensorDict undefined;
  undefined.insert("u", Tensor());
  EXPECT_THAT(error_of([&] { st::save(path, undefined); }), HasSubstr("tensor 'u' is undefined"));
  EXPECT_FALSE(std::filesystem::exists(path));
  for (const auto& entry : std::filesystem::directory_iterator(scratch_dir())) {
    EXPECT_EQ(entry.path().string().find(".tmp."), std::string::npos) << entry.path();
  }
  EXPECT_THAT(error_of([&] { st::save("/nonexistent-dir/x.safetensors", reserved); }),
              HasSubstr("\"__metadata__\""));
  TensorDict fine;
  fine.insert("a", ones({2}));
  EXPECT_THAT(error_of([&] { st::save("/nonexistent-dir/x.safetensors", fine); }),
              HasSubstr("cannot create /nonexistent-dir/x.safetensors.tmp."));
}

TEST_F(SafetensorsLoadTest, MappedTensorsKeepTheMappingAlive) {
  const std::string path = scratch_path("mapped.safetensors");
  TensorDict d;
  d.insert("a", arange(1000, kFloat32));
  d.insert("b", full({10}, 7, kInt32));
  st::save(path, d);
  const std::string file_before = read_file(path);
  Tensor a;
  {
    const st::LoadedTensors loaded = st::load(path);
    a = loaded["a"];
    EXPECT_FALSE(a.is_alias_of(loaded["b"])) << "each tensor has a storage of its own";
    EXPECT_EQ(a.storage().nbytes(), 4000u);
  }
  std::filesystem::remove(path);  // the mapping outlives the name
  EXPECT_EQ(a.sum().item<double>(), 999.0 * 1000 / 2);
  a.fill_(1.0f);  // copy-on-write: the process sees it, the file never does
  EXPECT_EQ(a.sum().item<double>(), 1000.0);
  write_file(path, file_before);
  EXPECT_EQ(st::load(path)["a"].sum().item<double>(), 999.0 * 1000 / 2);
}

TEST_F(SafetensorsLoadTest, UnalignedDataIsCopiedOutCorrectly) {
  // A header of 13 bytes of padding-free JSON puts the data at file offset 8 + N: make N odd so
  // that a float32 lands off its alignment in a mapping.
  std::string header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  if ((8 + header.size()) % 4 == 0) header += " ";
  std::string image = file_image(header);
  const float values[2] = {1.5f, -2.25f};
  image.append(reinterpret_cast<const char*>(values), 8);
  const std::string path = scratch_path("unaligned.safetensors");
  write_file(path, image);
  for (st::HostMemory m : {st::HostMemory::kMapped, st::HostMemory::kPinned}) {
    const Tensor x = st::load(path, {.host_memory = m})["x"];
    EXPECT_EQ(reinterpret_cast<uintptr_t>(x.data_ptr()) % 4, 0u);
    EXPECT_EQ(x[0].item<float>(), 1.5f);
    EXPECT_EQ(x[1].item<float>(), -2.25f);
  }
}

TEST_F(SafetensorsLoadTest, PinnedLoadUsesOneExactBlockAndProtectsItForAsyncCopies) {
  const std::string path = scratch_path("pinned.safetensors");
  TensorDict d;
  d.insert("big", full({(3 << 20) / 4 + 5}, 1.0f));  // 3 MiB + 20 bytes: a large block
  d.insert("small", full({16}, 2.0f));
  st::save(path, d);
  const memory::PinnedStats before = memory::pinned_stats();
  Tensor dev = empty({16}, TensorOptions(kFloat32).device(kSim0));
  const Stream stream = current_stream(kSim0);
  {
    StreamGate gate(stream);
    {
      const st::LoadedTensors loaded = st::load(path, {.host_memory = st::HostMemory::kPinned});
      const memory::PinnedStats st = memory::pinned_stats();
      EXPECT_EQ(st.large_allocation.current, before.large_allocation.current + 1);
      const int64_t data = static_cast<int64_t>(3 << 20) + 20 + 64;
      EXPECT_EQ(st.large_requested_bytes.current - before.large_requested_bytes.current, data);
      EXPECT_LT(st.large_allocated_bytes.current - before.large_allocated_bytes.current,
                data + 4096);
      EXPECT_TRUE(loaded["big"].is_pinned());
      EXPECT_TRUE(loaded["small"].is_pinned());
      EXPECT_FALSE(loaded["big"].is_alias_of(loaded["small"]));
      dev.copy_(loaded["small"], /*non_blocking=*/true);  // queued behind the gate
    }
    // Every tensor is gone, but the queued copy still reads the block: it must not be reused.
    const Tensor again = st::load(path, {.host_memory = st::HostMemory::kPinned})["small"];
    EXPECT_EQ(memory::pinned_stats().large_allocation.current, before.large_allocation.current + 1);
    EXPECT_EQ(memory::pinned_stats().num_host_alloc, before.num_host_alloc + 2)
        << "the first block was handed out again while a copy from it was queued";
  }
  stream.synchronize();
  EXPECT_EQ(dev.sum().item<double>(), 32.0);
}

TEST_F(SafetensorsLoadTest, DeviceLoadUnderChaosMatches) {
  const std::string path = scratch_path("chaos.safetensors");
  TensorDict d;
  for (int i = 0; i < 40; ++i) d.insert("w" + std::to_string(i), randn({17 * (i % 7) + 3, 33}));
  st::save(path, d);
  sim::SimConfig c = default_sim_config();
  c.chaos_seed = test_seed();
  c.chaos_max_delay = std::chrono::microseconds(300);
  sim::configure(c);
  SCOPED_TRACE(seed_trace());
  for (bool non_blocking : {false, true}) {
    const st::LoadedTensors loaded = st::load(
        path,
        {.device = kSim0, .staging_chunks = 2, .chunk_bytes = 8192, .non_blocking = non_blocking});
    // Work queued on the current stream after the load sees the data.
    Tensor sums = empty({static_cast<int64_t>(d.size())}, TensorOptions(kFloat64).device(kSim0));
    for (size_t i = 0; i < d.size(); ++i)
      sums[static_cast<int64_t>(i)] = loaded[i].value().sum().to(kFloat64);
    const std::vector<double> got = values_of(sums);
    for (size_t i = 0; i < d.size(); ++i) {
      EXPECT_NEAR(got[i], d[loaded[i].key()].sum().item<double>(), 1e-3) << loaded[i].key();
    }
  }
}

TEST_F(SafetensorsLoadTest, DirectReadsWhereTheFileSystemAllowsThem) {
  const std::string path = scratch_path("direct.safetensors");
  TensorDict d;
  d.insert("a", randn({1000, 37}));
  d.insert("b", randint(0, 9, {77}, kInt8));
  st::save(path, d);
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
  if (fd < 0) GTEST_SKIP() << "the test directory's file system refuses O_DIRECT: " << path;
  ::close(fd);
  for (const st::LoadOptions& o :
       {st::LoadOptions{.host_memory = st::HostMemory::kPinned, .read_mode = st::ReadMode::kDirect},
        st::LoadOptions{
            .device = kSim0, .read_mode = st::ReadMode::kDirect, .chunk_bytes = 8192}}) {
    expect_same(d, st::load(path, o));
  }
}

TEST_F(SafetensorsLoadTest, ReportsProgressToTheCallback) {
  const std::string path = scratch_path("progress.safetensors");
  TensorDict d;
  d.insert("a", randn({1 << 16}));
  st::save(path, d);
  for (const Device dev : {Device(DeviceType::CPU), kSim0}) {
    std::vector<st::Progress> seen;
    st::LoadOptions o{.device = dev, .host_memory = st::HostMemory::kPinned, .chunk_bytes = 65536};
    o.progress = [&](const st::Progress& p) { seen.push_back(p); };
    (void)st::load(path, o);
    ASSERT_GE(seen.size(), 4u);
    for (size_t i = 1; i < seen.size(); ++i) EXPECT_GE(seen[i].bytes_done, seen[i - 1].bytes_done);
    EXPECT_EQ(seen.back().bytes_done, uint64_t{1} << 18);
    EXPECT_EQ(seen.back().bytes_total, uint64_t{1} << 18);
  }
}

TEST(SafetensorsProgress, FormatsBytesRateAndEta) {
  st::Progress p{.bytes_done = 512ull << 20, .bytes_total = 1ull << 30, .seconds = 0.1};
  EXPECT_EQ(st::format_progress("m.safetensors", p, 10),
            "m.safetensors [#####     ] 512.0 MiB / 1.00 GiB  5.37 GB/s  ETA 0.1 s");
  p.bytes_done = p.bytes_total;
  EXPECT_THAT(st::format_progress("m", p, 4), HasSubstr("[####] 1.00 GiB / 1.00 GiB"));
}

TEST(SafetensorsProgress, DrawsOnlyOnTerminalsAndAboveTheThreshold) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  {
    st::ProgressReporter quiet("f", 1 << 30, nullptr, st::ProgressBar::kAuto, out, false);
    quiet.advance(1 << 30);
    quiet.finish();
    EXPECT_FALSE(quiet.draws_bar());
    st::ProgressReporter small("f", 1 << 20, nullptr, st::ProgressBar::kAuto, out, true);
    EXPECT_FALSE(small.draws_bar());
    st::ProgressReporter never("f", 1 << 30, nullptr, st::ProgressBar::kNever, out, true);
    EXPECT_FALSE(never.draws_bar());
  }
  EXPECT_EQ(std::ftell(out), 0);
  {
    st::ProgressReporter bar("f", uint64_t{1} << 30, nullptr, st::ProgressBar::kAuto, out, true);
    EXPECT_TRUE(bar.draws_bar());
    bar.advance(uint64_t{1} << 29);
    bar.advance(uint64_t{1} << 29);
    bar.finish();
  }
  std::rewind(out);
  char buf[512] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, out);
  std::fclose(out);
  const std::string text(buf, n);
  EXPECT_EQ(text.front(), '\r');
  EXPECT_EQ(text.back(), '\n');
  EXPECT_THAT(text, HasSubstr("1.00 GiB / 1.00 GiB"));
}

// A BOOL tensor whose bytes are not all 0 or 1 (a corrupt or hostile file) is refused on every
// load path, naming the tensor, the byte and the element, before any kernel reads it as bool.
TEST_F(SafetensorsLoadTest, BoolTensorsWithOtherBytesAreRefusedOnEveryPath) {
  std::string image = file_image(R"({"m":{"dtype":"BOOL","shape":[5],"data_offsets":[0,5]}})");
  image.append(std::string("\x01\x00\x01\xfe\x00", 5));
  const std::string path = scratch_path("bool.safetensors");
  write_file(path, image);
  for (const st::LoadOptions& o :
       {st::LoadOptions{}, st::LoadOptions{.host_memory = st::HostMemory::kPinned},
        st::LoadOptions{.host_memory = st::HostMemory::kPageable},
        st::LoadOptions{.device = kSim0}}) {
    EXPECT_THAT(error_of([&] { (void)st::load(path, o); }),
                HasSubstr(path + ": tensor 'm': expected BOOL bytes of 0 or 1, found 254 at "
                                 "element 3"));
  }
  image.back() = '\x01';
  image[image.size() - 2] = '\x00';
  write_file(path, image);
  EXPECT_EQ(st::load(path)["m"].sum().item<int64_t>(), 3);
}

TEST_F(SafetensorsLoadTest, LoadErrorsNameTheFile) {
  EXPECT_THAT(error_of([] { (void)st::load("/nonexistent/x.safetensors"); }),
              HasSubstr("safetensors: /nonexistent/x.safetensors: cannot open the file"));
  const std::string path = scratch_path("bad.safetensors");
  write_file(path, file_image(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 7));
  for (const st::LoadOptions& o : {st::LoadOptions{}, st::LoadOptions{.device = kSim0}}) {
    EXPECT_THAT(error_of([&] { (void)st::load(path, o); }),
                HasSubstr(path + ": the tensors' data ends at byte 8"));
  }
  EXPECT_THAT(error_of([] { (void)st::load(scratch_dir()); }),
              HasSubstr("expected a regular file"));
}

}  // namespace
}  // namespace ferry::testing
