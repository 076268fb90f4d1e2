// The sim device's oneDNN-family kernels: the CPU kernels of ferry/backends/cpu/dnnl/nn_kernels.h
// (GEMM, convolution, pooling, batch and layer norm, softmax), run on the stream worker over the
// sim's read-write mapping (sim_compute.h), each with a FLOP estimate for the compute-time model
// (FERRY_SIM_COMPUTE): multiply-adds count 2, a transcendental about 4.
#include "ferry/backends/cpu/dnnl/nn_kernels.h"
#include "ferry/backends/sim/sim_compute.h"
#include "ferry/device/compute_kernels.h"

namespace ferry::sim {
namespace {

double n_of(const Tensor& t) { return t.defined() ? static_cast<double>(t.numel()) : 0.0; }

double gemm_flops(const Tensor& out, const Tensor& a, const Tensor&, double, double beta,
                  const Tensor& bias) {
  // 2 * B * M * N * K, and one more pass over out for beta and the bias.
  return 2.0 * n_of(out) * static_cast<double>(a.size(2)) +
         (beta != 0 || bias.defined() ? n_of(out) : 0.0);
}

// 2 * (output elements) * (C / groups) * kH * kW: each output is a dot over its receptive field.
double conv_macs(const Tensor& out, const Tensor& weight) {
  return 2.0 * n_of(out) * static_cast<double>(weight.size(1) * weight.size(2) * weight.size(3));
}
double conv_forward_flops(const Tensor& out, const Tensor&, const Tensor& weight,
                          const Tensor& bias, const Conv2dParams&) {
  return conv_macs(out, weight) + (bias.defined() ? n_of(out) : 0.0);
}
double conv_backward_input_flops(const Tensor&, const Tensor& grad_out, const Tensor& weight,
                                 const Conv2dParams&) {
  return conv_macs(grad_out, weight);
}
double conv_backward_weight_flops(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor&,
                                  const Tensor& grad_out, const Conv2dParams&) {
  return conv_macs(grad_out, grad_weight) + (grad_bias.defined() ? n_of(grad_out) : 0.0);
}

double window(const Pool2dParams& p) { return static_cast<double>(p.kernel[0] * p.kernel[1]); }
double max_pool_forward_flops(const Tensor& out, const Tensor&, const Tensor&,
                              const Pool2dParams& p) {
  return n_of(out) * window(p);
}
double max_pool_backward_flops(const Tensor& grad_input, const Tensor& grad_out, const Tensor&) {
  return n_of(grad_input) + n_of(grad_out);
}
double avg_pool_forward_flops(const Tensor& out, const Tensor&, const Pool2dParams& p) {
  return n_of(out) * (window(p) + 1);
}
double avg_pool_backward_flops(const Tensor& grad_input, const Tensor& grad_out,
                               const Pool2dParams& p) {
  return n_of(grad_input) + n_of(grad_out) * window(p);
}
double adaptive_flops(const Tensor& a, const Tensor& b) { return n_of(a) + n_of(b); }

double bn_training_flops(const Tensor&, const Tensor&, const Tensor&, const Tensor& input,
                         const Tensor&, const Tensor&, const Tensor&, const Tensor&, double,
                         double) {
  return 7.0 * n_of(input);  // mean, variance, then normalize and scale
}
double bn_inference_flops(const Tensor&, const Tensor& input, const Tensor&, const Tensor&,
                          const Tensor&, const Tensor&, double) {
  return 2.0 * n_of(input);
}
double bn_backward_flops(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                         const Tensor& input, const Tensor&, const Tensor&, const Tensor&, bool) {
  return 8.0 * n_of(input);
}
double ln_forward_flops(const Tensor&, const Tensor&, const Tensor&, const Tensor& input,
                        const Tensor&, const Tensor&, int64_t, double) {
  return 7.0 * n_of(input);
}
double ln_backward_flops(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                         const Tensor& input, const Tensor&, const Tensor&, const Tensor&,
                         int64_t) {
  return 9.0 * n_of(input);
}
double softmax_forward_flops(const Tensor&, const Tensor& input, int64_t, bool) {
  return 7.0 * n_of(input);  // max, exp (4), sum, scale
}
double softmax_backward_flops(const Tensor& grad_input, const Tensor&, const Tensor&, int64_t,
                              bool log) {
  return (log ? 7.0 : 4.0) * n_of(grad_input);
}

}  // namespace

FERRY_REGISTER_DISPATCH(gemm_stub, DeviceType::Sim, (&HostKernel<&cpu::gemm, &gemm_flops>::run));
FERRY_REGISTER_DISPATCH(conv2d_forward_stub, DeviceType::Sim,
                        (&HostKernel<&cpu::conv2d_forward, &conv_forward_flops>::run));
FERRY_REGISTER_DISPATCH(
    conv2d_backward_input_stub, DeviceType::Sim,
    (&HostKernel<&cpu::conv2d_backward_input, &conv_backward_input_flops>::run));
FERRY_REGISTER_DISPATCH(
    conv2d_backward_weight_stub, DeviceType::Sim,
    (&HostKernel<&cpu::conv2d_backward_weight, &conv_backward_weight_flops>::run));
FERRY_REGISTER_DISPATCH(max_pool2d_forward_stub, DeviceType::Sim,
                        (&HostKernel<&cpu::max_pool2d_forward, &max_pool_forward_flops>::run));
FERRY_REGISTER_DISPATCH(max_pool2d_backward_stub, DeviceType::Sim,
                        (&HostKernel<&cpu::max_pool2d_backward, &max_pool_backward_flops>::run));
FERRY_REGISTER_DISPATCH(avg_pool2d_forward_stub, DeviceType::Sim,
                        (&HostKernel<&cpu::avg_pool2d_forward, &avg_pool_forward_flops>::run));
FERRY_REGISTER_DISPATCH(avg_pool2d_backward_stub, DeviceType::Sim,
                        (&HostKernel<&cpu::avg_pool2d_backward, &avg_pool_backward_flops>::run));
FERRY_REGISTER_DISPATCH(adaptive_avg_pool2d_forward_stub, DeviceType::Sim,
                        (&HostKernel<&cpu::adaptive_avg_pool2d_forward, &adaptive_flops>::run));
FERRY_REGISTER_DISPATCH(adaptive_avg_pool2d_backward_stub, DeviceType::Sim,
                        (&HostKernel<&cpu::adaptive_avg_pool2d_backward, &adaptive_flops>::run));
FERRY_REGISTER_DISPATCH(batch_norm_forward_training_stub, DeviceType::Sim,
                        (&HostKernel<&cpu::batch_norm_forward_training, &bn_training_flops>::run));
FERRY_REGISTER_DISPATCH(
    batch_norm_forward_inference_stub, DeviceType::Sim,
    (&HostKernel<&cpu::batch_norm_forward_inference, &bn_inference_flops>::run));
FERRY_REGISTER_DISPATCH(batch_norm_backward_stub, DeviceType::Sim,
                        (&HostKernel<&cpu::batch_norm_backward, &bn_backward_flops>::run));
FERRY_REGISTER_DISPATCH(layer_norm_forward_stub, DeviceType::Sim,
                        (&HostKernel<&cpu::layer_norm_forward, &ln_forward_flops>::run));
FERRY_REGISTER_DISPATCH(layer_norm_backward_stub, DeviceType::Sim,
                        (&HostKernel<&cpu::layer_norm_backward, &ln_backward_flops>::run));
FERRY_REGISTER_DISPATCH(softmax_forward_stub, DeviceType::Sim,
                        (&HostKernel<&cpu::softmax_forward, &softmax_forward_flops>::run));
FERRY_REGISTER_DISPATCH(softmax_backward_stub, DeviceType::Sim,
                        (&HostKernel<&cpu::softmax_backward, &softmax_backward_flops>::run));

}  // namespace ferry::sim
