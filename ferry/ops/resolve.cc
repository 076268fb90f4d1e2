// resolve_conj and resolve_neg: materialize a lazy bit. The result is self when the bit is
// clear, else a copy in self's layout whose values are the ones self reads as, with no lazy bit
// left (copy_ applies both bits, as PyTorch's resolve does through clone).
#include "ferry/core/tensor.h"

namespace ferry {

Tensor Tensor::resolve_conj() const {
  if (!is_conj()) return *this;
  return clone(MemoryFormat::Preserve);
}

Tensor Tensor::resolve_neg() const {
  if (!is_neg()) return *this;
  return clone(MemoryFormat::Preserve);
}

}  // namespace ferry
