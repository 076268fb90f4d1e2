// Device: where a tensor's bytes live, a device type plus an index.
// Parsed from and printed as "cpu", "cpu:0", "sim:1", "cuda:0". A device type without an index
// ("sim") means "the current device of that type" until resolved. There is one CPU: "cpu" and
// "cpu:0" keep the index they were written with (index() -1 or 0, as torch::Device) but compare
// and hash as the same device, and tensors on the CPU report plain "cpu".
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>

namespace ferry {

enum class DeviceType : int8_t { CPU = 0, Sim = 1, CUDA = 2 };
inline constexpr int kNumDeviceTypes = 3;

inline constexpr DeviceType kCPU = DeviceType::CPU;
inline constexpr DeviceType kSim = DeviceType::Sim;
inline constexpr DeviceType kCUDA = DeviceType::CUDA;

// "cpu", "sim", "cuda".
std::string_view device_type_name(DeviceType type);
std::ostream& operator<<(std::ostream& out, DeviceType type);

using DeviceIndex = int8_t;

class Device {
 public:
  // Implicit, as in PyTorch, so that a DeviceType or a string can stand for a Device.
  // A CPU index is -1 or 0 (any other value is taken as 0).
  constexpr Device(DeviceType type = DeviceType::CPU, DeviceIndex index = -1)  // NOLINT
      : type_(type),
        index_(type == DeviceType::CPU ? (index < 0 ? DeviceIndex{-1} : DeviceIndex{0}) : index) {}
  // Parses "cpu", "cpu:0", "sim", "sim:1", "cuda:0". Raises ferry::DeviceError naming the string.
  Device(std::string_view spec);                                       // NOLINT
  Device(const char* spec) : Device(std::string_view(spec)) {}         // NOLINT
  Device(const std::string& spec) : Device(std::string_view(spec)) {}  // NOLINT

  constexpr DeviceType type() const { return type_; }
  constexpr DeviceIndex index() const { return index_; }
  constexpr bool has_index() const { return index_ >= 0; }
  constexpr bool is_cpu() const { return type_ == DeviceType::CPU; }
  constexpr bool is_sim() const { return type_ == DeviceType::Sim; }
  constexpr bool is_cuda() const { return type_ == DeviceType::CUDA; }

  std::string str() const;

  friend constexpr bool operator==(Device a, Device b) {
    return a.type_ == b.type_ && (a.index_ == b.index_ || a.type_ == DeviceType::CPU);
  }

 private:
  DeviceType type_;
  DeviceIndex index_;
};

std::ostream& operator<<(std::ostream& out, Device device);

}  // namespace ferry

template <>
struct std::hash<ferry::Device> {
  size_t operator()(ferry::Device d) const noexcept {
    const auto index = d.is_cpu() ? ferry::DeviceIndex{-1} : d.index();  // cpu == cpu:0
    return (static_cast<size_t>(static_cast<uint8_t>(d.type())) << 8) | static_cast<uint8_t>(index);
  }
};
