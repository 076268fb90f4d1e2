// Parsing and printing of devices.
#include "ferry/core/device.h"

#include <charconv>
#include <ostream>

#include "ferry/core/error.h"

namespace ferry {

std::string_view device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::CPU:
      return "cpu";
    case DeviceType::Sim:
      return "sim";
    case DeviceType::CUDA:
      return "cuda";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& out, DeviceType type) {
  return out << device_type_name(type);
}

namespace {

constexpr int kMaxDeviceIndex = 127;

DeviceType parse_type(std::string_view name, std::string_view spec) {
  for (DeviceType t : {DeviceType::CPU, DeviceType::Sim, DeviceType::CUDA}) {
    if (name == device_type_name(t)) return t;
  }
  FERRY_FAIL_AS(DeviceError, "expected a device string such as \"cpu\", \"sim:1\" or \"cuda:0\", ",
                "but got \"", spec, "\" (unknown device type \"", name, "\")");
}

}  // namespace

Device::Device(std::string_view spec) {
  const auto colon = spec.find(':');
  type_ = parse_type(spec.substr(0, colon), spec);
  index_ = -1;
  if (colon == std::string_view::npos) return;
  const std::string_view digits = spec.substr(colon + 1);
  int value = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  const bool well_formed = !digits.empty() && ec == std::errc() &&
                           end == digits.data() + digits.size() && digits[0] != '+' &&
                           (digits.size() == 1 || digits[0] != '0');
  FERRY_CHECK_AS(DeviceError, well_formed && value >= 0 && value <= kMaxDeviceIndex,
                 "expected a device index between 0 and ", kMaxDeviceIndex,
                 " after the colon, but got \"", spec, "\"");
  FERRY_CHECK_AS(DeviceError, type_ != DeviceType::CPU || value == 0,
                 "expected the cpu device to have index 0 or none, but got \"", spec, "\"");
  index_ = static_cast<DeviceIndex>(value);
}

std::string Device::str() const {
  std::string s(device_type_name(type_));
  if (index_ >= 0) s += ":" + std::to_string(index_);
  return s;
}

std::ostream& operator<<(std::ostream& out, Device device) { return out << device.str(); }

}  // namespace ferry
