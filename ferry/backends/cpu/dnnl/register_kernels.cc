// The CPU registrations of the oneDNN-family compute stubs (ferry/device/compute_kernels.h): each
// stub's CPU entry is the nn_kernels.h kernel of the same contract, so every operator front-end
// that calls the stub on a CPU tensor runs oneDNN (or the kernels' portable loops).
#include "ferry/backends/cpu/dnnl/nn_kernels.h"
#include "ferry/device/compute_kernels.h"

namespace ferry::cpu {

FERRY_REGISTER_DISPATCH(gemm_stub, DeviceType::CPU, &gemm);
FERRY_REGISTER_DISPATCH(conv2d_forward_stub, DeviceType::CPU, &conv2d_forward);
FERRY_REGISTER_DISPATCH(conv2d_backward_input_stub, DeviceType::CPU, &conv2d_backward_input);
FERRY_REGISTER_DISPATCH(conv2d_backward_weight_stub, DeviceType::CPU, &conv2d_backward_weight);
FERRY_REGISTER_DISPATCH(max_pool2d_forward_stub, DeviceType::CPU, &max_pool2d_forward);
FERRY_REGISTER_DISPATCH(max_pool2d_backward_stub, DeviceType::CPU, &max_pool2d_backward);
FERRY_REGISTER_DISPATCH(avg_pool2d_forward_stub, DeviceType::CPU, &avg_pool2d_forward);
FERRY_REGISTER_DISPATCH(avg_pool2d_backward_stub, DeviceType::CPU, &avg_pool2d_backward);
FERRY_REGISTER_DISPATCH(adaptive_avg_pool2d_forward_stub, DeviceType::CPU,
                        &adaptive_avg_pool2d_forward);
FERRY_REGISTER_DISPATCH(adaptive_avg_pool2d_backward_stub, DeviceType::CPU,
                        &adaptive_avg_pool2d_backward);
FERRY_REGISTER_DISPATCH(batch_norm_forward_training_stub, DeviceType::CPU,
                        &batch_norm_forward_training);
FERRY_REGISTER_DISPATCH(batch_norm_forward_inference_stub, DeviceType::CPU,
                        &batch_norm_forward_inference);
FERRY_REGISTER_DISPATCH(batch_norm_backward_stub, DeviceType::CPU, &batch_norm_backward);
FERRY_REGISTER_DISPATCH(layer_norm_forward_stub, DeviceType::CPU, &layer_norm_forward);
FERRY_REGISTER_DISPATCH(layer_norm_backward_stub, DeviceType::CPU, &layer_norm_backward);
FERRY_REGISTER_DISPATCH(softmax_forward_stub, DeviceType::CPU, &softmax_forward);
FERRY_REGISTER_DISPATCH(softmax_backward_stub, DeviceType::CPU, &softmax_backward);

}  // namespace ferry::cpu
