// The device kernel hook's table; the sim and CUDA backends fill it when the library loads.
#include "ferry/device/device_copy_kernel.h"

namespace ferry {

FERRY_DEFINE_DISPATCH(device_copy_kernel_stub);

}  // namespace ferry
