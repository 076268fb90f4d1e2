// DLPack's names for ferry's dtypes and devices, both ways, and the stream a ferry consumer hands
// to a producer. Every refusal is a DLPackError naming what DLPack gave or what ferry has.
#include <cstdint>

#include "ferry/core/error.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"
#include "ferry/interop/dlpack.h"

namespace ferry {
namespace {

constexpr uint8_t bits_of(ScalarType t) { return static_cast<uint8_t>(element_size(t) * 8); }

bool at_least(DLPackVersion v, uint32_t major, uint32_t minor) {
  return v.major > major || (v.major == major && v.minor >= minor);
}

}  // namespace

DLDataType to_dlpack_dtype(ScalarType dtype, DLPackVersion version) {
  DLDataType out{};
  out.lanes = 1;
  out.bits = bits_of(dtype);
  switch (dtype) {
    case kBool:
      out.code = dlpack::kBoolCode;
      break;
    case kUInt8:
      out.code = kDLUInt;
      break;
    case kInt8:
    case kInt16:
    case kInt32:
    case kInt64:
      out.code = kDLInt;
      break;
    case kFloat16:
    case kFloat32:
    case kFloat64:
      out.code = kDLFloat;
      break;
    case kBFloat16:
      out.code = kDLBfloat;
      break;
    case kComplex64:
    case kComplex128:
      out.code = kDLComplex;
      break;
    case kFloat8_e4m3fn:
    case kFloat8_e5m2:
      FERRY_CHECK_AS(DLPackError, at_least(version, 1, 1), "DLPack export: ", dtype_name(dtype),
                     " has a DLPack type code only from DLPack 1.1, but the consumer reads ",
                     version.major, ".", version.minor,
                     version.major == 0 ? " (a legacy capsule; pass max_version=(1, 1))" : "",
                     "; convert it first, e.g. to float16 or float32");
      out.code = dtype == kFloat8_e4m3fn ? dlpack::kFloat8E4m3fnCode : dlpack::kFloat8E5m2Code;
      break;
  }
  return out;
}

ScalarType dtype_from_dlpack(DLDataType type) {
  auto fail = [&]() -> ScalarType {
    FERRY_FAIL_AS(DLPackError, "DLPack import: expected a dtype ferry has, but got type code ",
                  static_cast<int>(type.code), " with ", static_cast<int>(type.bits), " bits and ",
                  type.lanes, " lanes");
  };
  if (type.lanes != 1) return fail();
  switch (type.code) {
    case kDLInt:
      if (type.bits == 8) return kInt8;
      if (type.bits == 16) return kInt16;
      if (type.bits == 32) return kInt32;
      if (type.bits == 64) return kInt64;
      return fail();
    case kDLUInt:
      return type.bits == 8 ? kUInt8 : fail();
    case kDLFloat:
      if (type.bits == 16) return kFloat16;
      if (type.bits == 32) return kFloat32;
      if (type.bits == 64) return kFloat64;
      return fail();
    case kDLBfloat:
      return type.bits == 16 ? kBFloat16 : fail();
    case kDLComplex:
      if (type.bits == 64) return kComplex64;
      if (type.bits == 128) return kComplex128;
      return fail();
    case dlpack::kBoolCode:
      return type.bits == 8 ? kBool : fail();
    case dlpack::kFloat8E4m3fnCode:
      return type.bits == 8 ? kFloat8_e4m3fn : fail();
    case dlpack::kFloat8E5m2Code:
      return type.bits == 8 ? kFloat8_e5m2 : fail();
    default:
      return fail();
  }
}

DLDevice to_dlpack_device(Device device) {
  if (device.is_cpu()) return DLDevice{kDLCPU, 0};
  const Device d = device.has_index() ? device : current_device(device.type());
  if (d.is_sim()) return DLDevice{kDLExtDev, d.index()};
  FERRY_CHECK_AS(DLPackError, d.is_cuda(), "DLPack: ferry has no DLPack name for device ", d);
  return DLDevice{kDLCUDA, d.index()};
}

Device device_from_dlpack(DLDevice device) {
  const int type = device.device_type;
  const bool index_fits = device.device_id >= 0 && device.device_id <= 127;
  switch (type) {
    case kDLCPU:
    case kDLCUDAHost:
    case kDLROCMHost:
      return Device(DeviceType::CPU);
    case kDLCUDA:
    case kDLExtDev:
      FERRY_CHECK_AS(DLPackError, index_fits, "DLPack: expected a device index between 0 and 127, ",
                     "but got ", device.device_id);
      return Device(type == kDLCUDA ? DeviceType::CUDA : DeviceType::Sim,
                    static_cast<DeviceIndex>(device.device_id));
    default:
      FERRY_FAIL_AS(DLPackError,
                    "DLPack: expected a device ferry has (kDLCPU, kDLCUDAHost, kDLROCMHost, "
                    "kDLCUDA, or kDLExtDev for the sim), but got device type ",
                    type, " index ", device.device_id);
  }
}

std::optional<int64_t> dlpack_consumer_stream(DLDevice device) {
  if (device.device_type != kDLCUDA && device.device_type != kDLExtDev) return std::nullopt;
  const Device d = device_from_dlpack(device);
  if (d.index() >= device_count(d.type())) return std::nullopt;
  const Stream s = current_stream(d);
  if (d.is_sim()) return s.id();
  // CUDA: ferry's default stream is the legacy null stream, which the protocol spells 1.
  const auto handle = reinterpret_cast<intptr_t>(s.raw());
  return handle == 0 ? int64_t{1} : static_cast<int64_t>(handle);
}

}  // namespace ferry
