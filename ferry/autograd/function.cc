// AutogradContext and the name of a custom function's node.
#include "ferry/autograd/function.h"

namespace ferry::autograd {

variable_list AutogradContext::get_saved_variables() const {
  variable_list out;
  out.reserve(saved_.size());
  for (const SavedVariable& s : saved_) out.push_back(s.unpack(node_));
  return out;
}

void AutogradContext::mark_dirty(const variable_list& inputs) {
  for (const Tensor& t : inputs) dirty_.insert(t.impl());
}

void AutogradContext::mark_non_differentiable(const variable_list& outputs) {
  for (const Tensor& t : outputs) non_differentiable_.insert(t.impl());
}

namespace detail {

std::string demangle(const char* name) {
  int status = 0;
  char* readable = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && readable != nullptr ? readable : name;
  std::free(readable);
  // Keep the unqualified name, as PyTorch shows a Python class's.
  const size_t colon = out.rfind("::");
  return colon == std::string::npos ? out : out.substr(colon + 2);
}

}  // namespace detail
}  // namespace ferry::autograd
