// Randomized hostile input for the safetensors reader: valid files truncated anywhere, with
// bytes flipped in the length and the header, with header lengths and offsets drawn at random,
// and a list of hostile headers (deep nesting, huge numbers, duplicate keys, long strings, wrong
// types). Every input must either parse into a header whose tensors lie inside the file or raise
// a ferry::Error; a sample is also written to disk and loaded through every path, so ASan sees
// any read outside the file. Seeds are printed (FERRY_TEST_SEED replays a run).
#include <gtest/gtest.h>

#include <random>

#include "ferry/ferry.h"
#include "ferry/nn/safetensors.h"
#include "tests/nn/safetensors_test_util.h"
#include "tests/support/random.h"

namespace ferry::testing {
namespace {

namespace st = safetensors;

// A valid file image of a few random tensors.
std::string valid_image(std::mt19937_64& rng) {
  const std::vector<ScalarType> dtypes = {kFloat32, kBFloat16, kInt64, kUInt8, kBool, kFloat64};
  TensorDict d;
  const int n = static_cast<int>(rng() % 5);
  for (int i = 0; i < n; ++i) {
    std::vector<int64_t> shape;
    for (int r = static_cast<int>(rng() % 3); r > 0; --r)
      shape.push_back(static_cast<int64_t>(rng() % 4));
    d.insert("t" + std::to_string(i), zeros(shape, dtypes[rng() % dtypes.size()]));
  }
  const std::string path = scratch_path("valid.safetensors");
  st::Metadata meta;
  if (rng() % 2 == 0) meta["k"] = "v";
  st::save(path, d, meta);
  return read_file(path);
}

std::string mutate(std::string image, std::mt19937_64& rng) {
  switch (rng() % 7) {
    case 0:  // truncate
      image.resize(rng() % (image.size() + 1));
      break;
    case 1:  // flip header bytes
      for (int k = static_cast<int>(rng() % 4) + 1; k > 0 && image.size() > 8; --k) {
        image[8 + rng() % (image.size() - 8)] = static_cast<char>(rng());
      }
      break;
    case 2:  // a random header length
      for (int i = 0; i < 8; ++i)
        image[static_cast<size_t>(i)] =
            static_cast<char>(i < static_cast<int>(rng() % 9) ? rng() : 0);
      break;
    case 3:  // extra or missing data bytes
      if (rng() % 2 == 0) {
        image.append(rng() % 16 + 1, 'x');
      } else if (image.size() > 8) {
        image.pop_back();
      }
      break;
    case 4: {  // nudge a digit in the header
      const size_t n = std::min<size_t>(image.size(), 8 + 4096);
      for (size_t i = 8 + rng() % std::max<size_t>(n - 8, 1); i < n; ++i) {
        if (image[i] >= '0' && image[i] <= '9') {
          image[i] = static_cast<char>('0' + rng() % 10);
          break;
        }
      }
      break;
    }
    case 5:  // a byte that is not UTF-8
      if (image.size() > 9) image[9 + rng() % (image.size() - 9)] = '\xfe';
      break;
    default:  // a random suffix of a random length
      image += std::string(rng() % 8, static_cast<char>(rng()));
      break;
  }
  return image;
}

void check_parses_or_raises(const std::string& image) {
  try {
    const st::Header h = st::parse_file_image(image, "fuzz");
    for (const st::TensorInfo& t : h.tensors) {
      ASSERT_LE(t.begin, t.end);
      ASSERT_LE(h.data_offset + t.end, image.size()) << t.name;
    }
  } catch (const Error&) {
    // A clear error is the expected outcome for most inputs.
  }
}

TEST(SafetensorsFuzz, MutatedFilesParseOrRaise) {
  std::mt19937_64 rng = test_rng();
  SCOPED_TRACE(seed_trace());
  for (int round = 0; round < 40; ++round) {
    const std::string valid = valid_image(rng);
    check_parses_or_raises(valid);
    for (int k = 0; k < 100; ++k) {
      std::string image = valid;
      for (int m = static_cast<int>(rng() % 3) + 1; m > 0; --m) image = mutate(image, rng);
      check_parses_or_raises(image);
    }
  }
}

TEST(SafetensorsFuzz, HostileHeadersRaise) {
  const std::vector<std::string> headers = {
      std::string(50000, '['),
      std::string(50000, '{'),
      "{\"a\":" + std::string(5000, '[') + std::string(5000, ']') + "}",
      R"({"a":{"dtype":"F32","shape":[99999999999999999999999],"data_offsets":[0,4]}})",
      R"({"a":{"dtype":"F32","shape":[1e400],"data_offsets":[0,4]}})",
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,1e20]}})",
      R"({"a":{"dtype":"F32","shape":[3037000500,3037000500],"data_offsets":[0,4]}})",
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551615,3]}})",
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551615]}})",
      R"({"a":null})",
      R"({"a":[]})",
      R"({"__metadata__":"x"})",
      R"({"":{"dtype":"","shape":[],"data_offsets":[0,0]}})",
      "{\"" + std::string(1 << 20, 'n') + "\":1}",
      "{\"a\":\"\\ud800\"}",
      "\xef\xbb\xbf{}",
      std::string("{}\0", 3),
      "null",
      "\"string\"",
      "1",
  };
  for (const std::string& h : headers) {
    for (uint64_t data : {0, 4, 16}) check_parses_or_raises(file_image(h, data));
  }
}

// A sample of mutated files through every load path: what parses must load, and nothing may read
// outside the file (ASan).
TEST(SafetensorsFuzz, MutatedFilesLoadOrRaiseOnEveryPath) {
  std::mt19937_64 rng = test_rng();
  SCOPED_TRACE(seed_trace());
  const std::string path = scratch_path("mutated.safetensors");
  int loaded = 0;
  for (int k = 0; k < 120; ++k) {
    const std::string image = mutate(valid_image(rng), rng);
    write_file(path, image);
    for (const st::LoadOptions& o :
         {st::LoadOptions{}, st::LoadOptions{.host_memory = st::HostMemory::kPinned},
          st::LoadOptions{.device = Device("sim:0"), .chunk_bytes = 4096}}) {
      try {
        const st::LoadedTensors t = st::load(path, o);
        for (const auto& item : t) (void)item.value().sum().item<double>();
        ++loaded;
      } catch (const Error&) {
      }
    }
  }
  EXPECT_GT(loaded, 0) << "no mutation survived: the test would not see a bad load";
}

}  // namespace
}  // namespace ferry::testing
