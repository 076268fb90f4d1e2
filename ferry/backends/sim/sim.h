// The sim device's public knobs: its settings (SimConfig, read from FERRY_SIM_* on first use and
// replaceable at run time for tests), and host_address(), the translation from a sim device
// address to the mapping the backend's workers read and write.
// Invariant: device addresses handed out by the sim are never readable by host code (they are
// mapped PROT_NONE); only code running on a sim stream's worker thread (a host function), or
// code that has synchronized with the streams that use the memory, may touch the bytes behind
// host_address().
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ferry::sim {

// The links a copy can take; each may have its own bandwidth and latency.
enum class Link : uint8_t { HostToDevice, DeviceToHost, DeviceToDevice, Peer };
inline constexpr int kNumLinks = 4;
// "h2d", "d2h", "d2d", "peer": the names FERRY_SIM_BANDWIDTH / FERRY_SIM_LATENCY use.
std::string_view link_name(Link link);

struct SimConfig {
  enum class PeerMode : uint8_t { kAll, kNone, kMatrix };

  // FERRY_SIM_DEVICES: number of sim devices, 0..64.
  int devices = 2;
  // FERRY_SIM_MEMORY: bytes per device; allocating beyond it raises OutOfMemoryError.
  size_t memory = size_t{4} << 30;
  // FERRY_SIM_PEER: which devices may access which peers' memory. With kMatrix,
  // peer_matrix[i][j] says whether device i may access device j (the diagonal is ignored).
  PeerMode peer_mode = PeerMode::kAll;
  std::vector<std::vector<bool>> peer_matrix;
  // FERRY_SIM_BANDWIDTH, bytes per second per link; 0 means unlimited.
  std::array<double, kNumLinks> bandwidth{};
  // FERRY_SIM_LATENCY, a fixed cost per copy per link.
  std::array<std::chrono::nanoseconds, kNumLinks> latency{};
  // FERRY_SIM_CHAOS: when set, each queued operation is delayed, with probability 1/2, by a
  // random time up to chaos_max_delay, drawn from a generator seeded with this seed.
  std::optional<uint64_t> chaos_seed;
  std::chrono::nanoseconds chaos_max_delay = std::chrono::milliseconds(1);
  // FERRY_SIM_COMPUTE: the modelled arithmetic rate in FLOP/s (0: off). Each compute kernel then
  // occupies its stream for at least flops / compute_rate, so schedules can be measured at
  // GPU-like speed on a small host. With compute_timing_only the arithmetic is skipped and
  // kernel outputs are undefined: for schedule benchmarks only, never for results.
  double compute_rate = 0;
  bool compute_timing_only = false;
  // ThreadSanitizer builds only (no environment variable): whether TSan sees the sim workers'
  // accesses to device memory. True reports missing stream synchronization as a data race; a
  // test that races on device memory on purpose (to show chaos at work) turns it off. Accesses
  // to host memory are always visible.
  bool tsan_sees_device_memory = true;

  // Whether device `device` may access device `peer`'s memory under this config.
  bool peer_allowed(int device, int peer) const;
  // Raises DeviceError when a value is out of range or the peer matrix does not match.
  void validate() const;
  // The settings in environment-variable form: {"FERRY_SIM_DEVICES", "2"}, ...
  std::vector<std::pair<std::string, std::string>> settings() const;

  // Reads FERRY_SIM_* through `getenv` (unset variables keep their defaults). Raises DeviceError
  // naming the variable, the expected format and the value given.
  static SimConfig from_env(const std::function<const char*(const char*)>& getenv);
  static SimConfig from_env();
};

// Parsers behind from_env, exposed for tests; `name` is used in error messages.
// Sizes: "4096", "512K", "512M", "8G", "1T" (K/M/G/T are powers of 1024; "KiB", "GB" ... also
// accepted, and "GB" is 1000^3).
size_t parse_memory_size(std::string_view text, std::string_view name = "size");
// Bandwidths in bytes per second: "12G", "12GB/s", "900M" (K/M/G/T are powers of 1000, "Ki"
// forms powers of 1024); "none", "off" or "0" mean unlimited.
double parse_bandwidth(std::string_view text, std::string_view name = "bandwidth");
// Rates: "15T", "900G", "1.5e13" FLOP/s (K/M/G/T are powers of 1000); "none", "off" or "0" mean
// no model.
double parse_flop_rate(std::string_view text, std::string_view name = "rate");
// Durations: "250ns", "10us", "1.5ms", "2s"; "0" and "none" mean zero.
std::chrono::nanoseconds parse_duration(std::string_view text, std::string_view name = "duration");

// The settings in effect (the environment's until configure() is called).
SimConfig config();
// The compute-time model in effect, read without a lock (compute kernels ask on every launch).
struct ComputeModel {
  double rate = 0;  // FLOP/s; 0: no model
  bool timing_only = false;
  // The h2d link's bandwidth (bytes/s; 0: unlimited): a kernel reading operands in mapped pinned
  // host memory (host_device_pointer) holds its stream for their bytes over it, on top of
  // flops / rate.
  double host_read_bandwidth = 0;
};
ComputeModel compute_model();
// Replaces the settings. Waits for all queued sim work first. Changing `devices` or `memory`
// requires that no sim allocation (device memory, pinned memory or IPC mapping) is live;
// otherwise raises DeviceError. Streams survive; peer access is disabled again.
void configure(const SimConfig& config);
// configure(SimConfig::from_env()).
void reset_config();

// The read-write host mapping of a sim device address (interior pointers included). Raises
// DeviceError when `device_ptr` is not inside a live sim allocation of this process.
void* host_address(const void* device_ptr);

// The sim device whose memory holds `device_ptr` (any address inside a live allocation of this
// process, imported ones included), or -1 for an address outside every sim allocation.
int device_of(const void* device_ptr);

// Whether `device_ptr` is a sim device address of pinned host memory (host_device_pointer).
bool is_host_mapped(const void* device_ptr);

// Whether work on sim device `device` may touch `peer`'s memory right now: the same device, or
// a peer whose access `device` has enabled (the backend's own state, not a cache above it).
bool peer_access_enabled(int device, int peer);

// How many operations (copies, memsets, marks, waits, host functions) queued on a sim stream of
// `device` have not finished yet; `stream` is the backend handle (Stream::raw()). For tests and
// diagnostics: it lets a test see that another thread's work has reached a queue.
uint64_t pending_operations(int device, void* stream);

}  // namespace ferry::sim
