// SimConfig: parsing FERRY_SIM_* values, validating them and printing them back.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "ferry/backends/sim/sim.h"
#include "ferry/core/error.h"

namespace ferry::sim {
namespace {

constexpr int kMaxSimDevices = 64;

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Splits "12.5GB/s" into 12.5 and "gb/s" (lower-cased). Returns false without a leading number.
bool split_number(std::string_view text, double& number, std::string& unit) {
  text = trim(text);
  const char* begin = text.data();
  const char* end = begin + text.size();
  const char* p = begin;
  while (p < end && (std::isdigit(static_cast<unsigned char>(*p)) || *p == '.')) ++p;
  if (p == begin) return false;
  const std::string digits(begin, p);
  char* parsed_end = nullptr;
  number = std::strtod(digits.c_str(), &parsed_end);
  if (parsed_end != digits.c_str() + digits.size() || !std::isfinite(number)) return false;
  unit = lower(trim(std::string_view(p, static_cast<size_t>(end - p))));
  return true;
}

// The multiplier for a size suffix ("", "k", "kb", "kib", "m", ...); `plain_base` is what a bare
// letter means (1024 for memory, 1000 for bandwidth). Returns 0 for an unknown suffix.
double size_multiplier(std::string unit, double plain_base) {
  if (unit.empty() || unit == "b") return 1;
  const std::string letters = "kmgt";
  const size_t power = letters.find(unit[0]);
  if (power == std::string::npos) return 0;
  const std::string rest = unit.substr(1);
  double base;
  if (rest.empty()) {
    base = plain_base;
  } else if (rest == "i" || rest == "ib") {
    base = 1024;
  } else if (rest == "b") {
    base = 1000;
  } else {
    return 0;
  }
  return std::pow(base, static_cast<double>(power + 1));
}

// "4G" for 4 GiB, "1.5G", "512M", "4096".
std::string format_size(double value, double base) {
  const char* units[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (i < 4 && value >= base && std::fmod(value, base) == 0) {
    value /= base;
    ++i;
  }
  if (i < 4 && value >= base) {  // not a whole multiple: one more step with decimals
    value /= base;
    ++i;
  }
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.6g%s", value, units[i]);
  return buffer;
}

std::string format_duration(std::chrono::nanoseconds d) {
  const auto ns = static_cast<double>(d.count());
  char buffer[64];
  if (ns >= 1e9) {
    std::snprintf(buffer, sizeof(buffer), "%.6gs", ns / 1e9);
  } else if (ns >= 1e6) {
    std::snprintf(buffer, sizeof(buffer), "%.6gms", ns / 1e6);
  } else if (ns >= 1e3) {
    std::snprintf(buffer, sizeof(buffer), "%.6gus", ns / 1e3);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.6gns", ns);
  }
  return buffer;
}

std::string format_per_link(const std::function<std::string(int)>& value) {
  bool all_same = true;
  for (int i = 1; i < kNumLinks; ++i) all_same = all_same && value(i) == value(0);
  if (all_same) return value(0);
  std::string out;
  for (int i = 0; i < kNumLinks; ++i) {
    if (!out.empty()) out += ",";
    out += std::string(link_name(static_cast<Link>(i))) + "=" + value(i);
  }
  return out;
}

// "12G" sets every link; "h2d=12G,peer=50G" sets some; "12G,peer=50G" sets all, then one.
template <typename T, typename Parse>
std::array<T, kNumLinks> parse_per_link(std::string_view text, std::string_view name, Parse parse) {
  std::array<T, kNumLinks> values{};
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = trim(text.substr(start, comma - start));
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      values.fill(parse(item));
    } else {
      const std::string key = lower(trim(item.substr(0, eq)));
      int link = -1;
      for (int i = 0; i < kNumLinks; ++i) {
        if (key == link_name(static_cast<Link>(i))) link = i;
      }
      FERRY_CHECK_AS(DeviceError, link >= 0, name,
                     ": expected a link name h2d, d2h, d2d or peer before '=', but got \"", key,
                     "\" in \"", text, "\"");
      values[static_cast<size_t>(link)] = parse(trim(item.substr(eq + 1)));
    }
    start = comma + 1;
  }
  return values;
}

std::vector<std::vector<bool>> parse_peer_matrix(std::string_view text, int devices) {
  std::vector<std::vector<bool>> rows;
  size_t start = 0;
  while (start <= text.size()) {
    size_t semi = text.find(';', start);
    if (semi == std::string_view::npos) semi = text.size();
    const std::string_view row_text = text.substr(start, semi - start);
    std::vector<bool> row;
    size_t p = 0;
    while (p <= row_text.size()) {
      size_t comma = row_text.find(',', p);
      if (comma == std::string_view::npos) comma = row_text.size();
      const std::string_view cell = trim(row_text.substr(p, comma - p));
      FERRY_CHECK_AS(DeviceError, cell == "0" || cell == "1",
                     "FERRY_SIM_PEER: expected \"all\", \"none\" or rows of 0/1 such as "
                     "\"1,0;0,1\", but got \"",
                     cell, "\" in \"", text, "\"");
      row.push_back(cell == "1");
      p = comma + 1;
    }
    rows.push_back(std::move(row));
    start = semi + 1;
  }
  FERRY_CHECK_AS(DeviceError, static_cast<int>(rows.size()) == devices, "FERRY_SIM_PEER: expected ",
                 devices, " rows (one per device, FERRY_SIM_DEVICES=", devices, "), but got ",
                 rows.size(), " in \"", text, "\"");
  for (const auto& row : rows) {
    FERRY_CHECK_AS(DeviceError, static_cast<int>(row.size()) == devices,
                   "FERRY_SIM_PEER: expected ", devices, " entries in every row, but got ",
                   row.size(), " in \"", text, "\"");
  }
  return rows;
}

}  // namespace

std::string_view link_name(Link link) {
  switch (link) {
    case Link::HostToDevice:
      return "h2d";
    case Link::DeviceToHost:
      return "d2h";
    case Link::DeviceToDevice:
      return "d2d";
    case Link::Peer:
      return "peer";
  }
  return "unknown";
}

size_t parse_memory_size(std::string_view text, std::string_view name) {
  double number = 0;
  std::string unit;
  const bool ok = split_number(text, number, unit);
  const double multiplier = ok ? size_multiplier(unit, 1024) : 0;
  const double bytes = number * multiplier;
  FERRY_CHECK_AS(DeviceError, ok && multiplier > 0 && bytes < 0x1p63, name,
                 ": expected a size such as 4096, 512M or 8G, but got \"", text, "\"");
  return static_cast<size_t>(bytes);
}

double parse_bandwidth(std::string_view text, std::string_view name) {
  const std::string low = lower(trim(text));
  if (low == "none" || low == "off" || low == "0") return 0;
  double number = 0;
  std::string unit;
  bool ok = split_number(text, number, unit);
  if (ok && unit.size() >= 2 && unit.substr(unit.size() - 2) == "/s") {
    unit.resize(unit.size() - 2);
  }
  const double multiplier = ok ? size_multiplier(unit, 1000) : 0;
  ok = ok && multiplier > 0;
  FERRY_CHECK_AS(DeviceError, ok, name,
                 ": expected bytes per second such as 12G, 900M or 25GB/s (or \"none\"), but got "
                 "\"",
                 text, "\"");
  return number * multiplier;
}

double parse_flop_rate(std::string_view text, std::string_view name) {
  const std::string low = lower(trim(text));
  if (low == "none" || low == "off" || low == "0") return 0;
  // strtod rather than split_number: rates are often written in exponent form (1.5e13).
  const std::string spelled(trim(text));
  char* end = nullptr;
  const double number = std::strtod(spelled.c_str(), &end);
  bool ok = end != spelled.c_str();
  std::string unit = ok ? lower(trim(std::string_view(end))) : std::string();
  for (const char* suffix : {"flop/s", "flops", "flop"}) {
    const std::string_view sv(suffix);
    if (unit.size() >= sv.size() && unit.compare(unit.size() - sv.size(), sv.size(), sv) == 0) {
      unit.resize(unit.size() - sv.size());
      break;
    }
  }
  const double multiplier = ok ? (unit.empty() ? 1 : size_multiplier(unit, 1000)) : 0;
  ok = ok && multiplier > 0 && number > 0 && std::isfinite(number * multiplier);
  FERRY_CHECK_AS(DeviceError, ok, name,
                 ": expected a rate in FLOP/s such as 15T, 900G or 1.5e13 (or \"off\"), but got "
                 "\"",
                 text, "\"");
  return number * multiplier;
}

std::chrono::nanoseconds parse_duration(std::string_view text, std::string_view name) {
  const std::string low = lower(trim(text));
  if (low == "none" || low == "off" || low == "0") return std::chrono::nanoseconds(0);
  double number = 0;
  std::string unit;
  const bool ok = split_number(text, number, unit);
  double scale = 0;
  if (unit == "ns") scale = 1;
  if (unit == "us") scale = 1e3;
  if (unit == "ms") scale = 1e6;
  if (unit == "s") scale = 1e9;
  FERRY_CHECK_AS(DeviceError, ok && scale > 0 && number * scale < 1e15, name,
                 ": expected a duration such as 250ns, 10us, 1.5ms or 2s, but got \"", text, "\"");
  return std::chrono::nanoseconds(static_cast<int64_t>(std::llround(number * scale)));
}

bool SimConfig::peer_allowed(int device, int peer) const {
  if (device == peer) return true;
  switch (peer_mode) {
    case PeerMode::kAll:
      return true;
    case PeerMode::kNone:
      return false;
    case PeerMode::kMatrix:
      return device < static_cast<int>(peer_matrix.size()) &&
             peer < static_cast<int>(peer_matrix[static_cast<size_t>(device)].size()) &&
             peer_matrix[static_cast<size_t>(device)][static_cast<size_t>(peer)];
  }
  return false;
}

void SimConfig::validate() const {
  FERRY_CHECK_AS(DeviceError, devices >= 0 && devices <= kMaxSimDevices,
                 "sim config: expected between 0 and ", kMaxSimDevices, " devices, but got ",
                 devices);
  FERRY_CHECK_AS(DeviceError, memory >= 4096,
                 "sim config: expected at least 4096 bytes of memory per device, but got ", memory);
  if (peer_mode == PeerMode::kMatrix) {
    bool square = static_cast<int>(peer_matrix.size()) == devices;
    for (const auto& row : peer_matrix) square = square && static_cast<int>(row.size()) == devices;
    FERRY_CHECK_AS(DeviceError, square, "sim config: expected a ", devices, "x", devices,
                   " peer matrix (one row and column per device), but got ", peer_matrix.size(),
                   " rows");
  }
  for (int i = 0; i < kNumLinks; ++i) {
    FERRY_CHECK_AS(DeviceError, bandwidth[i] >= 0 && latency[i].count() >= 0,
                   "sim config: expected a non-negative bandwidth and latency for link ",
                   link_name(static_cast<Link>(i)), ", but got ", bandwidth[i], " B/s and ",
                   latency[i].count(), " ns");
  }
  FERRY_CHECK_AS(DeviceError, chaos_max_delay.count() >= 0,
                 "sim config: expected a non-negative chaos delay, but got ",
                 chaos_max_delay.count(), " ns");
  FERRY_CHECK_AS(DeviceError, compute_rate >= 0 && std::isfinite(compute_rate),
                 "sim config: expected a non-negative, finite compute rate, but got ", compute_rate,
                 " FLOP/s");
  FERRY_CHECK_AS(DeviceError, !compute_timing_only || compute_rate > 0,
                 "sim config: timing-only compute needs a compute rate, but the rate is off");
}

std::vector<std::pair<std::string, std::string>> SimConfig::settings() const {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("FERRY_SIM_DEVICES", std::to_string(devices));
  out.emplace_back("FERRY_SIM_MEMORY", format_size(static_cast<double>(memory), 1024));
  std::string peer = peer_mode == PeerMode::kAll ? "all" : "none";
  if (peer_mode == PeerMode::kMatrix) {
    peer.clear();
    for (size_t i = 0; i < peer_matrix.size(); ++i) {
      if (i > 0) peer += ";";
      for (size_t j = 0; j < peer_matrix[i].size(); ++j) {
        if (j > 0) peer += ",";
        peer += peer_matrix[i][j] ? "1" : "0";
      }
    }
  }
  out.emplace_back("FERRY_SIM_PEER", peer);
  out.emplace_back("FERRY_SIM_BANDWIDTH", format_per_link([&](int i) {
                     return bandwidth[i] == 0 ? std::string("none")
                                              : format_size(bandwidth[i], 1000);
                   }));
  out.emplace_back("FERRY_SIM_LATENCY", format_per_link([&](int i) {
                     return latency[i].count() == 0 ? std::string("none")
                                                    : format_duration(latency[i]);
                   }));
  out.emplace_back("FERRY_SIM_CHAOS",
                   chaos_seed ? std::to_string(*chaos_seed) + ":" + format_duration(chaos_max_delay)
                              : std::string("off"));
  out.emplace_back("FERRY_SIM_COMPUTE", compute_rate == 0
                                            ? std::string("off")
                                            : format_size(compute_rate, 1000) + "FLOP/s" +
                                                  (compute_timing_only ? ",timing-only" : ""));
  return out;
}

SimConfig SimConfig::from_env(const std::function<const char*(const char*)>& getenv) {
  SimConfig c;
  auto get = [&](const char* name) -> std::optional<std::string> {
    const char* value = getenv(name);
    if (value == nullptr || trim(value).empty()) return std::nullopt;  // empty means unset
    return std::string(trim(value));
  };
  if (auto v = get("FERRY_SIM_DEVICES")) {
    int n = -1;
    const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
    FERRY_CHECK_AS(
        DeviceError,
        ec == std::errc() && end == v->data() + v->size() && n >= 0 && n <= kMaxSimDevices,
        "FERRY_SIM_DEVICES: expected a number of devices between 0 and ", kMaxSimDevices,
        ", but got \"", *v, "\"");
    c.devices = n;
  }
  if (auto v = get("FERRY_SIM_MEMORY")) c.memory = parse_memory_size(*v, "FERRY_SIM_MEMORY");
  if (auto v = get("FERRY_SIM_PEER")) {
    const std::string mode = lower(*v);
    if (mode == "all" || mode.empty()) {
      c.peer_mode = PeerMode::kAll;
    } else if (mode == "none") {
      c.peer_mode = PeerMode::kNone;
    } else {
      c.peer_mode = PeerMode::kMatrix;
      c.peer_matrix = parse_peer_matrix(*v, c.devices);
    }
  }
  if (auto v = get("FERRY_SIM_BANDWIDTH")) {
    c.bandwidth = parse_per_link<double>(*v, "FERRY_SIM_BANDWIDTH", [](std::string_view s) {
      return parse_bandwidth(s, "FERRY_SIM_BANDWIDTH");
    });
  }
  if (auto v = get("FERRY_SIM_LATENCY")) {
    c.latency = parse_per_link<std::chrono::nanoseconds>(
        *v, "FERRY_SIM_LATENCY",
        [](std::string_view s) { return parse_duration(s, "FERRY_SIM_LATENCY"); });
  }
  if (auto v = get("FERRY_SIM_CHAOS")) {
    const std::string mode = lower(*v);
    if (!mode.empty() && mode != "off" && mode != "none") {
      const size_t colon = v->find(':');
      const std::string seed_text = v->substr(0, colon);
      uint64_t seed = 0;
      const auto [end, ec] =
          std::from_chars(seed_text.data(), seed_text.data() + seed_text.size(), seed);
      FERRY_CHECK_AS(DeviceError, ec == std::errc() && end == seed_text.data() + seed_text.size(),
                     "FERRY_SIM_CHAOS: expected \"off\", a seed such as 42, or a seed and a "
                     "maximum delay such as 42:200us, but got \"",
                     *v, "\"");
      c.chaos_seed = seed;
      if (colon != std::string::npos) {
        c.chaos_max_delay = parse_duration(v->substr(colon + 1), "FERRY_SIM_CHAOS");
      }
    }
  }
  if (auto v = get("FERRY_SIM_COMPUTE")) {
    const size_t comma = v->find(',');
    c.compute_rate = parse_flop_rate(trim(v->substr(0, comma)), "FERRY_SIM_COMPUTE");
    if (comma != std::string::npos) {
      const std::string mode = lower(std::string(trim(v->substr(comma + 1))));
      FERRY_CHECK_AS(DeviceError, mode == "timing-only",
                     "FERRY_SIM_COMPUTE: expected a rate such as 15T, optionally followed by "
                     "\",timing-only\", but got \"",
                     *v, "\"");
      c.compute_timing_only = true;
    }
  }
  c.validate();
  return c;
}

SimConfig SimConfig::from_env() {
  return from_env([](const char* name) { return std::getenv(name); });
}

}  // namespace ferry::sim
