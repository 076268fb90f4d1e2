// FERRY_ALLOC_CONF parsing, and the settings in effect. The hot path reads them without a lock,
// through a sequence lock that hands out each update whole; the environment is read on first use,
// unless a program has set its own settings first.
#include "ferry/memory/alloc_config.h"

#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <system_error>

#include "ferry/core/error.h"

namespace ferry::memory {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kMinMaxSplitMb = 20;  // the large segment size: smaller limits make no sense
constexpr const char* kKeys = "max_split_size_mb, garbage_collection_threshold";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

size_t parse_max_split_mb(std::string_view value) {
  uint64_t mb = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), mb);
  FERRY_CHECK(ec == std::errc() && end == value.data() + value.size() && mb > kMinMaxSplitMb &&
                  mb <= (SIZE_MAX / kMiB),
              "FERRY_ALLOC_CONF: max_split_size_mb expects a whole number of MiB greater than ",
              kMinMaxSplitMb, ", but got '", value, "'");
  return static_cast<size_t>(mb) * kMiB;
}

double parse_gc_threshold(std::string_view value) {
  double v = 0.0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  FERRY_CHECK(ec == std::errc() && end == value.data() + value.size() && std::isfinite(v) &&
                  v > 0.0 && v < 1.0,
              "FERRY_ALLOC_CONF: garbage_collection_threshold expects a number strictly between "
              "0 and 1, but got '",
              value, "'");
  return v;
}

// The settings in effect. Allocations read them on every call, so without a lock: a sequence
// lock, which never shows a reader one field of an update and the other of the one before. The
// fields are atomics (no data race for the sanitizer to see) with sequentially consistent order,
// which keeps the protocol obviously right and costs plain loads on x86; only writers pay.
struct Live {
  std::atomic<uint64_t> sequence{0};  // odd while a writer is between its two increments
  std::atomic<size_t> max_split_size{SIZE_MAX};
  std::atomic<double> gc_threshold{0.0};
  // Set once FERRY_ALLOC_CONF has been applied, or a program has chosen its own settings (which
  // then win over the environment).
  std::atomic<bool> settled{false};
  std::mutex write_mutex;  // one writer at a time, as the sequence lock requires

  AllocConfig load() const {
    for (;;) {
      const uint64_t before = sequence.load();
      AllocConfig c;
      c.max_split_size = max_split_size.load();
      c.garbage_collection_threshold = gc_threshold.load();
      // An odd or changed sequence means a writer was at work: the pair may be torn.
      if ((before & 1) == 0 && sequence.load() == before) return c;
    }
  }
  // Callers hold write_mutex.
  void store(const AllocConfig& c) {
    const uint64_t s = sequence.load();
    sequence.store(s + 1);
    max_split_size.store(c.max_split_size);
    gc_threshold.store(c.garbage_collection_threshold);
    sequence.store(s + 2);
  }
};

Live& live() {
  static Live l;
  return l;
}

// A bad variable raises here, and again on every use until a program sets its own settings.
void read_env_once() {
  Live& l = live();
  if (l.settled.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(l.write_mutex);
  if (l.settled.load(std::memory_order_relaxed)) return;
  const char* env = std::getenv("FERRY_ALLOC_CONF");
  if (env != nullptr) l.store(AllocConfig::parse(env));
  l.settled.store(true, std::memory_order_release);
}

}  // namespace

AllocConfig AllocConfig::parse(std::string_view text) {
  AllocConfig config;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    FERRY_CHECK(colon != std::string_view::npos,
                "FERRY_ALLOC_CONF: expected items of the form key:value, but got '", item, "'");
    const std::string_view key = trim(item.substr(0, colon));
    const std::string_view value = trim(item.substr(colon + 1));
    if (key == "max_split_size_mb") {
      config.max_split_size = parse_max_split_mb(value);
    } else if (key == "garbage_collection_threshold") {
      config.garbage_collection_threshold = parse_gc_threshold(value);
    } else {
      FERRY_FAIL_AS(Error, "FERRY_ALLOC_CONF: unknown key '", key, "' (with value '", value,
                    "'); expected one of ", kKeys);
    }
  }
  return config;
}

std::string AllocConfig::str() const {
  std::ostringstream out;
  const char* sep = "";
  if (max_split_size != SIZE_MAX) {
    out << "max_split_size_mb:" << max_split_size / kMiB;
    sep = ",";
  }
  if (garbage_collection_threshold > 0.0) {
    out << sep << "garbage_collection_threshold:" << garbage_collection_threshold;
  }
  return out.str();
}

AllocConfig alloc_config() {
  read_env_once();
  return live().load();
}

AllocConfig set_alloc_config(const AllocConfig& config) {
  FERRY_CHECK(config.max_split_size == SIZE_MAX || config.max_split_size > kMinMaxSplitMb * kMiB,
              "set_alloc_config: expected max_split_size above ", kMinMaxSplitMb,
              " MiB or SIZE_MAX, but got ", config.max_split_size, " bytes");
  FERRY_CHECK(
      config.garbage_collection_threshold == 0.0 ||
          (config.garbage_collection_threshold > 0.0 && config.garbage_collection_threshold < 1.0),
      "set_alloc_config: expected garbage_collection_threshold 0 (off) or in (0, 1), "
      "but got ",
      config.garbage_collection_threshold);
  Live& l = live();
  std::lock_guard<std::mutex> lock(l.write_mutex);
  const AllocConfig previous = l.load();
  l.store(config);
  l.settled.store(true, std::memory_order_release);
  return previous;
}

AllocConfig set_alloc_conf(std::string_view text) {
  return set_alloc_config(AllocConfig::parse(text));
}

}  // namespace ferry::memory
