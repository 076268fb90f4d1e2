// Names and formatting for the memory layer's statistics.
#include "ferry/memory/stats.h"

#include <cstdio>

namespace ferry::memory {

std::string_view block_state_name(BlockState state) {
  switch (state) {
    case BlockState::kAllocated:
      return "allocated";
    case BlockState::kAwaitingEvents:
      return "awaiting events";
    case BlockState::kFree:
      return "free";
  }
  return "unknown";
}

std::string format_bytes(size_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes) / 1024.0;
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f %s", value, kUnits[unit]);
  return buffer;
}

}  // namespace ferry::memory
