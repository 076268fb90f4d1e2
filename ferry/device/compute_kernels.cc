// The compute kernel stubs (see compute_kernels.h).
#include "ferry/device/compute_kernels.h"

namespace ferry {

FERRY_DEFINE_DISPATCH(reduce_stub);
FERRY_DEFINE_DISPATCH(index_select_stub);
FERRY_DEFINE_DISPATCH(index_add_stub);
FERRY_DEFINE_DISPATCH(nll_loss_forward_stub);
FERRY_DEFINE_DISPATCH(nll_loss_backward_stub);
FERRY_DEFINE_DISPATCH(gemm_stub);
FERRY_DEFINE_DISPATCH(conv2d_forward_stub);
FERRY_DEFINE_DISPATCH(conv2d_backward_input_stub);
FERRY_DEFINE_DISPATCH(conv2d_backward_weight_stub);
FERRY_DEFINE_DISPATCH(max_pool2d_forward_stub);
FERRY_DEFINE_DISPATCH(max_pool2d_backward_stub);
FERRY_DEFINE_DISPATCH(avg_pool2d_forward_stub);
FERRY_DEFINE_DISPATCH(avg_pool2d_backward_stub);
FERRY_DEFINE_DISPATCH(adaptive_avg_pool2d_forward_stub);
FERRY_DEFINE_DISPATCH(adaptive_avg_pool2d_backward_stub);
FERRY_DEFINE_DISPATCH(batch_norm_forward_training_stub);
FERRY_DEFINE_DISPATCH(batch_norm_forward_inference_stub);
FERRY_DEFINE_DISPATCH(batch_norm_backward_stub);
FERRY_DEFINE_DISPATCH(layer_norm_forward_stub);
FERRY_DEFINE_DISPATCH(layer_norm_backward_stub);
FERRY_DEFINE_DISPATCH(softmax_forward_stub);
FERRY_DEFINE_DISPATCH(softmax_backward_stub);

}  // namespace ferry
