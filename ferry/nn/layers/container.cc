// Sequential and ModuleList: registration, chaining, indexing and slicing (see container.h).
#include "ferry/nn/layers/container.h"

#include <algorithm>

namespace ferry::nn {
namespace {

int64_t wrap_index(int64_t index, size_t size, const char* what) {
  const auto n = static_cast<int64_t>(size);
  FERRY_CHECK_AS(IndexError, index >= -n && index < n, what, ": index ", index,
                 " is out of range (expected in [", -n, ", ", n, "))");
  return index < 0 ? index + n : index;
}

}  // namespace

SequentialImpl::SequentialImpl(std::vector<std::pair<std::string, AnyModule>> named) {
  for (auto& [name, module] : named) push_back(name, std::move(module));
}

void SequentialImpl::push_back(AnyModule module) {
  push_back(std::to_string(modules_.size()), std::move(module));
}

void SequentialImpl::push_back(std::string name, AnyModule module) {
  FERRY_CHECK(module.ptr() != nullptr, "Sequential::push_back: the module is null");
  register_module(name, module.ptr());
  names_.push_back(std::move(name));
  modules_.push_back(std::move(module));
}

Tensor SequentialImpl::forward(const Tensor& input) {
  Tensor x = input;
  for (const AnyModule& m : modules_) x = m.forward(x);
  return x;
}

std::shared_ptr<Module> SequentialImpl::ptr(int64_t index) const {
  return modules_[static_cast<size_t>(wrap_index(index, modules_.size(), "Sequential"))].ptr();
}

std::shared_ptr<SequentialImpl> SequentialImpl::slice(int64_t start, int64_t end,
                                                      int64_t step) const {
  FERRY_CHECK(step >= 1, "Sequential::slice: expected step >= 1, given ", step);
  const auto n = static_cast<int64_t>(modules_.size());
  auto clamp = [n](int64_t i) { return std::clamp(i < 0 ? i + n : i, int64_t{0}, n); };
  auto out = std::make_shared<SequentialImpl>();
  for (int64_t i = clamp(start); i < clamp(end); i += step) {
    out->push_back(names_[static_cast<size_t>(i)], modules_[static_cast<size_t>(i)]);
  }
  out->training_ = training_;
  return out;
}

std::shared_ptr<Module> ModuleListImpl::ptr(int64_t index) const {
  return modules_[static_cast<size_t>(wrap_index(index, modules_.size(), "ModuleList"))];
}

}  // namespace ferry::nn
