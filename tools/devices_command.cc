// `ferry devices`: every device type, its devices (memory, streams in use), the peer-access
// matrix and the backend's settings (for sim: the FERRY_SIM_* values in effect). A type without
// devices prints why ("cuda: 0 devices (cudaGetDeviceCount: ...)"); nothing here needs a GPU.
#include <cstdio>
#include <string>

#include "ferry/backends/sim/sim.h"
#include "ferry/ferry.h"
#include "tools/command.h"

namespace ferry::tools {
namespace {

std::string format_bytes(size_t bytes) {
  char buffer[32];
  const double gib = static_cast<double>(bytes) / (1 << 30);
  if (gib >= 1) {
    std::snprintf(buffer, sizeof(buffer), "%.2f GiB", gib);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  }
  return buffer;
}

void print_peer_matrix(DeviceType type, int count) {
  std::printf("  peer access (row device can access column device's memory):\n        ");
  for (int j = 0; j < count; ++j)
    std::printf(" %6s", Device(type, static_cast<DeviceIndex>(j)).str().c_str());
  std::printf("\n");
  for (int i = 0; i < count; ++i) {
    const Device row(type, static_cast<DeviceIndex>(i));
    std::printf("  %-6s", row.str().c_str());
    for (int j = 0; j < count; ++j) {
      const Device column(type, static_cast<DeviceIndex>(j));
      const char* cell = i == j                             ? "-"
                         : !can_access_peer(row, column)    ? "no"
                         : peer_access_enabled(row, column) ? "on"
                                                            : "yes";
      std::printf(" %6s", cell);
    }
    std::printf("\n");
  }
}

// Prints one device type; returns false when querying it failed.
bool print_type(DeviceType type) {
  const char* name = device_type_name(type).data();
  try {
    const int count = device_count(type);
    if (count == 0) {
      std::printf("%s: 0 devices (%s)\n", name, device_unavailable_reason(type).c_str());
      return true;
    }
    std::printf("%s: %d device%s\n", name, count, count == 1 ? "" : "s");
    if (type == DeviceType::CPU) return true;
    for (int i = 0; i < count; ++i) {
      const Device device(type, static_cast<DeviceIndex>(i));
      const MemoryInfo memory = memory_info(device);
      std::printf("  %-6s memory %s total, %s free; streams in use %d of %d (default + pool)\n",
                  device.str().c_str(), format_bytes(memory.total).c_str(),
                  format_bytes(memory.free).c_str(), streams_in_use(device), 1 + kStreamPoolSize);
    }
    if (count > 1) print_peer_matrix(type, count);
    const auto settings = get_backend(type).settings();
    if (!settings.empty()) {
      std::printf("  settings:\n");
      for (const auto& [key, value] : settings) {
        std::printf("    %s=%s\n", key.c_str(), value.c_str());
      }
    }
    if (type == DeviceType::Sim && sim::compute_model().timing_only) {
      std::printf(
          "  WARNING: FERRY_SIM_COMPUTE is timing-only: sim kernels SKIP THEIR ARITHMETIC and "
          "their OUTPUTS ARE UNDEFINED (for schedule benchmarks only)\n");
    }
    return true;
  } catch (const Error& e) {
    std::printf("%s: error: %s\n", name, e.what());
    return false;
  }
}

int run_devices() {
  bool ok = true;
  for (DeviceType type : {DeviceType::CPU, DeviceType::Sim, DeviceType::CUDA}) {
    ok = print_type(type) && ok;
  }
  return ok ? 0 : 1;
}

}  // namespace

FERRY_REGISTER_COMMAND("devices",
                       "List devices: memory, streams, peer access and the sim device's settings",
                       [](CLI::App& /*sub*/) -> std::function<int()> {
                         return [] { return run_devices(); };
                       });

}  // namespace ferry::tools
