// Backward formulas of copy_ and fill_. copy_ carries every move autograd must see: clone,
// contiguous and to() are composites over it, so to(device) brings the gradient back to the
// source's device (and the engine casts it to the source's dtype).
#include "ferry/autograd/record.h"

namespace ferry::autograd {
namespace {

using Grads = const variable_list&;

Tensor& copy_autograd(Tensor& self, const Tensor& src, bool non_blocking) {
  check_inplace(self, "copy_");
  Recorder rec("CopyBackwards", {&self, &src});
  below_autograd([&] { self.copy_(src, non_blocking); });
  if (rec) {
    const Device src_device = src.device();
    // self's old values are overwritten: no gradient flows to them.
    rec.record_inplace(self, [src_device](FormulaNode& n, Grads g) -> variable_list {
      return {Tensor(), n.needs_input_grad(1) ? g[0].to(src_device) : Tensor()};
    });
  }
  return self;
}

Tensor& fill_autograd(Tensor& self, const Scalar& value) {
  check_inplace(self, "fill_");
  Recorder rec("FillBackward0", {&self});
  below_autograd([&] { self.fill_(value); });
  if (rec) {
    rec.record_inplace(self, [](FormulaNode&, Grads) -> variable_list { return {Tensor()}; });
  }
  return self;
}

}  // namespace

FERRY_LIBRARY(ferry, m) {
  impl_autograd(m, "copy_", &copy_autograd, "CopyBackwards");
  impl_autograd(m, "fill_", &fill_autograd, "FillBackward0");
}

}  // namespace ferry::autograd
