// FERRY_ALLOC_CONF: parsing, errors that name the key and the value, the programmatic setter,
// and reading the environment once (in a fresh process, through a death test).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/memory/alloc_config.h"
#include "ferry/memory/caching_allocator.h"
#include "tests/memory/memory_fixture.h"

namespace ferry::testing {
namespace {

using memory::AllocConfig;

std::string parse_error(const std::string& text) {
  try {
    AllocConfig::parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(AllocConfigTest, ParsesKeysAndValues) {
  AllocConfig c = AllocConfig::parse("max_split_size_mb:128,garbage_collection_threshold:0.8");
  EXPECT_EQ(c.max_split_size, 128 * kMiB);
  EXPECT_DOUBLE_EQ(c.garbage_collection_threshold, 0.8);
  EXPECT_EQ(AllocConfig::parse(c.str()), c);

  c = AllocConfig::parse("  max_split_size_mb : 64 , ");
  EXPECT_EQ(c.max_split_size, 64 * kMiB);
  EXPECT_EQ(c.garbage_collection_threshold, 0.0);

  EXPECT_EQ(AllocConfig::parse(""), AllocConfig{});
  EXPECT_EQ(AllocConfig{}.str(), "");
  EXPECT_EQ(AllocConfig::parse("max_split_size_mb:21").max_split_size, 21 * kMiB);
}

TEST(AllocConfigTest, ErrorsNameTheKeyAndTheValue) {
  struct Case {
    const char* text;
    const char* expected[2];
  };
  const Case cases[] = {
      {"foo:1", {"unknown key 'foo'", "'1'"}},
      {"max_split_size_mb:abc", {"max_split_size_mb", "'abc'"}},
      {"max_split_size_mb:20", {"greater than 20", "'20'"}},
      {"max_split_size_mb:-5", {"max_split_size_mb", "'-5'"}},
      {"max_split_size_mb:64MB", {"max_split_size_mb", "'64MB'"}},
      {"garbage_collection_threshold:1.5", {"garbage_collection_threshold", "'1.5'"}},
      {"garbage_collection_threshold:0", {"strictly between 0 and 1", "'0'"}},
      {"max_split_size_mb", {"key:value", "'max_split_size_mb'"}},
  };
  for (const Case& c : cases) {
    const std::string msg = parse_error(c.text);
    for (const char* part : c.expected) {
      EXPECT_NE(msg.find(part), std::string::npos) << c.text << " -> " << msg;
    }
    EXPECT_NE(msg.find("FERRY_ALLOC_CONF"), std::string::npos) << msg;
  }
}

TEST(AllocConfigTest, SetterReplacesTheSettingsOrNothing) {
  const AllocConfig original = memory::alloc_config();
  const AllocConfig previous = memory::set_alloc_conf("max_split_size_mb:200");
  EXPECT_EQ(previous, original);
  EXPECT_EQ(memory::alloc_config().max_split_size, 200 * kMiB);
  EXPECT_EQ(memory::stats(kSim0).max_split_size, 200 * kMiB);
  EXPECT_THROW(memory::set_alloc_conf("max_split_size_mb:200,bogus:1"), Error);
  EXPECT_EQ(memory::alloc_config().max_split_size, 200 * kMiB) << "a bad string changes nothing";
  AllocConfig bad;
  bad.garbage_collection_threshold = 2.0;
  EXPECT_THROW(memory::set_alloc_config(bad), Error);
  memory::set_alloc_config(original);
  EXPECT_EQ(memory::alloc_config(), original);
}

TEST(AllocConfigTest, ReadersNeverSeeHalfAnUpdate) {
  const AllocConfig original = memory::alloc_config();
  AllocConfig a;
  a.max_split_size = 40 * kMiB;
  a.garbage_collection_threshold = 0.5;
  AllocConfig b;
  b.max_split_size = 300 * kMiB;
  b.garbage_collection_threshold = 0.9;
  memory::set_alloc_config(a);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> torn{0}, reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        const AllocConfig c = memory::alloc_config();
        if (!(c == a) && !(c == b)) ++torn;
        ++reads;
      }
    });
  }
  // Updates start once both readers run, and go on for a while (a torn read needs a reader
  // between its two loads exactly while a writer is between its two stores: rare per update).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (reads.load() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  const int64_t reads_before = reads.load();
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  for (int i = 0;
       std::chrono::steady_clock::now() < until ||
       (reads.load() - reads_before < 100000 && std::chrono::steady_clock::now() < deadline);
       ++i) {
    memory::set_alloc_config(i % 2 == 0 ? b : a);
  }
  const int64_t reads_during = reads.load() - reads_before;
  stop = true;
  for (auto& t : readers) t.join();
  memory::set_alloc_config(original);
  EXPECT_GE(reads_during, 100000) << "too few reads overlapped the updates";
  EXPECT_EQ(torn.load(), 0) << "readers saw one field of an update and the other of another, in "
                            << torn.load() << " of " << reads.load() << " reads";
}

// Runs in a fresh process (the "threadsafe" death-test style re-executes the binary), where the
// allocator has not read its settings yet.
TEST(AllocConfigDeathTest, ReadsTheEnvironmentOnceAtFirstUse) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("FERRY_ALLOC_CONF", "max_split_size_mb:64,garbage_collection_threshold:0.5", 1);
        const AllocConfig first = memory::alloc_config();
        setenv("FERRY_ALLOC_CONF", "max_split_size_mb:128", 1);  // too late: read once
        const bool ok = first.max_split_size == 64 * kMiB &&
                        first.garbage_collection_threshold == 0.5 &&
                        memory::alloc_config() == first;
        std::_Exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        setenv("FERRY_ALLOC_CONF", "max_split_size_mb:tiny", 1);
        try {
          memory::stats(kSim0);
        } catch (const Error& e) {
          std::fputs(e.what(), stderr);
          std::_Exit(3);
        }
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(3), "max_split_size_mb expects .* but got 'tiny'");
}

}  // namespace
}  // namespace ferry::testing
