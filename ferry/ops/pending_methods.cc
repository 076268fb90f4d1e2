// TEMPORARY: Tensor methods whose operators are still being written. Each raises
// NotImplementedError; the file disappears as the real definitions land.
#include "ferry/core/tensor.h"

namespace ferry {

#define FERRY_PENDING(name) FERRY_FAIL_AS(NotImplementedError, name " is not implemented yet")

Tensor& Tensor::copy_(const Tensor&, bool) { FERRY_PENDING("copy_"); }
Tensor Tensor::contiguous(MemoryFormat) const { FERRY_PENDING("contiguous"); }
Tensor Tensor::clone(MemoryFormat) const { FERRY_PENDING("clone"); }
Tensor Tensor::to(TensorOptions, bool, bool, std::optional<MemoryFormat>) const {
  FERRY_PENDING("to");
}
Tensor Tensor::to(ScalarType, bool, bool, std::optional<MemoryFormat>) const {
  FERRY_PENDING("to");
}
Tensor Tensor::to(Device, ScalarType, bool, bool, std::optional<MemoryFormat>) const {
  FERRY_PENDING("to");
}
Tensor Tensor::to(const Tensor&, bool, bool, std::optional<MemoryFormat>) const {
  FERRY_PENDING("to");
}
Tensor Tensor::cpu() const { FERRY_PENDING("cpu"); }
Tensor Tensor::resolve_conj() const { FERRY_PENDING("resolve_conj"); }
Tensor Tensor::resolve_neg() const { FERRY_PENDING("resolve_neg"); }
Tensor Tensor::pin_memory() const { FERRY_PENDING("pin_memory"); }
bool Tensor::is_pinned() const { FERRY_PENDING("is_pinned"); }
void Tensor::record_stream(const Stream&) const { FERRY_PENDING("record_stream"); }
std::string Tensor::str() const { FERRY_PENDING("str"); }
std::ostream& operator<<(std::ostream&, const Tensor&) { FERRY_PENDING("operator<<"); }

}  // namespace ferry
