// nn::Module: registration, the recursive accessors, modes, gradients, moves and printing.
// Traversals are depth first in registration order and remember what they have visited, so a
// module or tensor registered under several names is visited once (the first name wins);
// state_dict alone lists every name, as PyTorch's does.
#include "ferry/nn/module.h"

#include <cxxabi.h>

#include <cstdlib>
#include <ostream>
#include <sstream>
#include <typeinfo>

#include "ferry/autograd/grad_mode.h"
#include "ferry/autograd/node.h"
#include "ferry/core/error.h"
#include "ferry/device/runtime.h"
#include "ferry/nn/transfer.h"
#include "ferry/ops/factories.h"

namespace ferry::nn {
namespace {

// "ferry::nn::MyNetImpl" -> "MyNet"; "Foo<ns::Bar>" -> "Foo<ns::Bar>".
std::string short_type_name(const std::type_info& type) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string name = status == 0 && demangled != nullptr ? demangled : type.name();
  std::free(demangled);
  const size_t template_start = name.find('<');
  const size_t last_scope = name.substr(0, template_start).rfind("::");
  if (last_scope != std::string::npos) name = name.substr(last_scope + 2);
  const size_t end = name.find('<') == std::string::npos ? name.size() : name.find('<');
  if (end > 4 && name.compare(end - 4, 4, "Impl") == 0) name.erase(end - 4, 4);
  return name;
}

// PyTorch's _addindent: every line but the first indented by `spaces`.
std::string add_indent(const std::string& text, int spaces) {
  if (text.find('\n') == std::string::npos) return text;
  std::string out;
  const std::string pad(static_cast<size_t>(spaces), ' ');
  size_t start = 0;
  bool first = true;
  while (start <= text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    out += (first ? "" : "\n" + pad) + text.substr(start, end - start);
    first = false;
    start = end + 1;
  }
  return out;
}

// Depth-first walk over distinct modules, with their dotted prefixes.
void walk(const Module& m, const std::string& prefix, std::unordered_set<const Module*>& seen,
          const std::function<void(const std::string&, const Module&)>& fn) {
  if (!seen.insert(&m).second) return;
  fn(prefix, m);
  for (const auto& child : m.named_children()) {
    walk(*child.value(), prefix.empty() ? child.key() : prefix + "." + child.key(), seen, fn);
  }
}

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

}  // namespace

Module::Module(std::string name) : name_(std::move(name)) {}
Module::Module() = default;

const std::string& Module::name() const {
  if (name_.empty()) name_ = short_type_name(typeid(*this));
  return name_;
}

// ---- registration ------------------------------------------------------------------------------

void Module::check_new_name(const std::string& key, const char* what) const {
  FERRY_CHECK(!key.empty(), what, " name must not be empty");
  FERRY_CHECK(key.find('.') == std::string::npos, what, " name must not contain a dot (got \"", key,
              "\")");
  const char* taken = parameters_.contains(key) ? "a parameter"
                      : buffers_.contains(key)  ? "a buffer"
                      : children_.contains(key) ? "a submodule"
                                                : nullptr;
  FERRY_CHECK(taken == nullptr, what, " '", key, "' already defined: ", name(), " has ", taken,
              " of that name");
}

Tensor& Module::register_parameter(std::string name, Tensor tensor, bool requires_grad) {
  check_new_name(name, "Parameter");
  if (tensor.defined()) {
    FERRY_CHECK(tensor.is_leaf(), "register_parameter: '", name,
                "' is not a leaf (it was computed from tensors that require grad); register "
                "tensor.detach() instead");
    tensor.requires_grad_(requires_grad);
  }
  return parameters_.insert(std::move(name), std::move(tensor));
}

Tensor& Module::register_buffer(std::string name, Tensor tensor, bool persistent) {
  check_new_name(name, "Buffer");
  if (!persistent) non_persistent_.insert(name);
  return buffers_.insert(std::move(name), std::move(tensor));
}

void Module::add_child(std::string name, std::shared_ptr<Module> module) {
  check_new_name(name, "Submodule");
  FERRY_CHECK(module != nullptr, "register_module: submodule '", name, "' is null");
  std::unordered_set<const Module*> seen;
  bool cycle = false;
  walk(*module, "", seen, [&](const std::string&, const Module& m) { cycle |= &m == this; });
  FERRY_CHECK(!cycle, "register_module: registering '", name, "' would make ", this->name(),
              " its own descendant");
  children_.insert(std::move(name), std::move(module));
}

void Module::replace_child(const std::string& name, std::shared_ptr<Module> module) {
  FERRY_CHECK(children_.contains(name), "replace_module: ", this->name(),
              " has no submodule named '", name, "'");
  FERRY_CHECK(module != nullptr, "replace_module: the new submodule '", name, "' is null");
  children_[name] = std::move(module);
}

bool Module::is_persistent_buffer(const std::string& name) const {
  return buffers_.contains(name) && non_persistent_.count(name) == 0;
}

// ---- accessors
// -----------------------------------------------------------------------------------

OrderedDict<std::string, Tensor> Module::named_parameters(bool recurse) const {
  OrderedDict<std::string, Tensor> out;
  std::unordered_set<const TensorImpl*> tensors;
  std::unordered_set<const Module*> seen;
  walk(*this, "", seen, [&](const std::string& prefix, const Module& m) {
    if (!recurse && &m != this) return;
    for (const auto& p : m.parameters_) {
      if (p.value().defined() && tensors.insert(p.value().impl()).second) {
        out.insert(join(prefix, p.key()), p.value());
      }
    }
  });
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  return named_parameters(recurse).values();
}

OrderedDict<std::string, Tensor> Module::named_buffers(bool recurse) const {
  OrderedDict<std::string, Tensor> out;
  std::unordered_set<const TensorImpl*> tensors;
  std::unordered_set<const Module*> seen;
  walk(*this, "", seen, [&](const std::string& prefix, const Module& m) {
    if (!recurse && &m != this) return;
    for (const auto& b : m.buffers_) {
      if (b.value().defined() && tensors.insert(b.value().impl()).second) {
        out.insert(join(prefix, b.key()), b.value());
      }
    }
  });
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const { return named_buffers(recurse).values(); }

OrderedDict<std::string, std::shared_ptr<Module>> Module::named_children() const {
  OrderedDict<std::string, std::shared_ptr<Module>> out;
  std::unordered_set<const Module*> seen;
  for (const auto& c : children_) {
    if (seen.insert(c.value().get()).second) out.insert(c.key(), c.value());
  }
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const { return named_children().values(); }

OrderedDict<std::string, std::shared_ptr<Module>> Module::named_modules(
    const std::string& name_prefix, bool include_self) const {
  std::shared_ptr<Module> self;
  if (include_self) {
    self = std::const_pointer_cast<Module>(weak_from_this().lock());
    FERRY_CHECK(self != nullptr, "named_modules/modules with include_self: ", name(),
                " must be owned by a std::shared_ptr (a ModuleHolder or std::make_shared); "
                "call it with include_self=false otherwise");
  }
  OrderedDict<std::string, std::shared_ptr<Module>> out;
  std::unordered_set<const Module*> seen;
  seen.insert(this);
  if (include_self) out.insert(name_prefix, self);
  // Children are reached through their shared_ptrs.
  std::function<void(const std::string&, const Module&)> visit = [&](const std::string& prefix,
                                                                     const Module& m) {
    for (const auto& c : m.children_) {
      if (!seen.insert(c.value().get()).second) continue;
      const std::string name = join(prefix, c.key());
      out.insert(name, c.value());
      visit(name, *c.value());
    }
  };
  visit(name_prefix, *this);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::modules(bool include_self) const {
  return named_modules("", include_self).values();
}

void Module::apply(const std::function<void(Module&)>& fn) {
  std::unordered_set<const Module*> seen;
  walk(*this, "", seen, [&](const std::string&, const Module& m) { fn(const_cast<Module&>(m)); });
}

void Module::apply(const std::function<void(const std::string&, Module&)>& fn,
                   const std::string& name_prefix) {
  std::unordered_set<const Module*> seen;
  walk(*this, name_prefix, seen,
       [&](const std::string& prefix, const Module& m) { fn(prefix, const_cast<Module&>(m)); });
}

std::vector<Tensor> Module::entries() const {
  std::vector<Tensor> out;
  std::unordered_set<const TensorImpl*> tensors;
  std::unordered_set<const Module*> seen;
  walk(*this, "", seen, [&](const std::string&, const Module& m) {
    for (const auto& p : m.parameters_) {
      const Tensor& t = p.value();
      if (!t.defined() || !tensors.insert(t.impl()).second) continue;
      out.push_back(t);
      const Tensor& g = t.grad();
      if (g.defined() && tensors.insert(g.impl()).second) out.push_back(g);
    }
    for (const auto& b : m.buffers_) {
      const Tensor& t = b.value();
      if (t.defined() && tensors.insert(t.impl()).second) out.push_back(t);
    }
  });
  return out;
}

// ---- moves
// ----------------------------------------------------------------------------------------

void Module::move(std::optional<Device> device, std::optional<ScalarType> dtype, bool non_blocking,
                  const std::function<bool(const Tensor&)>& no_copy) {
  autograd::NoGradGuard no_grad;
  if (dtype) {
    FERRY_CHECK_AS(DTypeError, is_floating_point(*dtype) || is_complex(*dtype),
                   "Module::to only accepts floating point or complex dtypes, but got desired "
                   "dtype=",
                   *dtype);
  }
  if (device) device = checked_device(*device);
  std::vector<MovePair> moves;
  std::vector<Tensor> moved;                       // the module's tensor of each move
  std::vector<std::pair<Tensor, Tensor>> updates;  // (the module's tensor, its new data): to_empty
  for (const Tensor& t : entries()) {
    const bool empty_only = no_copy && no_copy(t);
    const ScalarType to_dtype =
        dtype && (t.is_floating_point() || t.is_complex()) ? *dtype : t.dtype();
    const Device to_device = device.value_or(t.device());
    if (to_device == t.device() && to_dtype == t.dtype()) continue;
    // A non-blocking move to the host lands in pinned memory, so the copy is only queued (as
    // Tensor::to does).
    const bool pinned = non_blocking && !t.is_cpu() && to_device.is_cpu() && !empty_only;
    const TensorOptions options = TensorOptions(to_dtype).device(to_device).pinned_memory(pinned);
    if (empty_only) {
      updates.emplace_back(t, empty_like(t, options));
    } else {
      moves.push_back({t, options, Tensor()});
      moved.push_back(t);
    }
  }
  // Small host tensors land in place: their new data aliases one device block per batch.
  batched_move(moves, non_blocking);
  for (size_t i = 0; i < moves.size(); ++i) moved[i].set_data(moves[i].dst);
  for (const auto& [t, data] : updates) t.set_data(data);
}

void Module::to(Device device, bool non_blocking) { move(device, std::nullopt, non_blocking); }
void Module::to(ScalarType dtype, bool non_blocking) { move(std::nullopt, dtype, non_blocking); }
void Module::to(Device device, ScalarType dtype, bool non_blocking) {
  move(device, dtype, non_blocking);
}
void Module::cpu() { to(Device(DeviceType::CPU)); }
void Module::cuda(DeviceIndex index) { to(Device(DeviceType::CUDA, index)); }
void Module::to_empty(Device device) {
  move(device, std::nullopt, false, [](const Tensor&) { return true; });
}

// ---- modes and gradients
// -------------------------------------------------------------------------

void Module::train(bool on) {
  is_training_ = on;
  for (const auto& c : children_) c.value()->train(on);
}

void Module::zero_grad(bool set_to_none) {
  autograd::NoGradGuard no_grad;
  for (const Tensor& p : parameters()) {
    if (!p.grad().defined()) continue;
    Tensor& g = p.mutable_grad();
    if (set_to_none) {
      g = Tensor();
      continue;
    }
    if (g.grad_fn() != nullptr) {
      g.detach_();
    } else if (g.requires_grad()) {
      g.requires_grad_(false);
    }
    g.zero_();
  }
}

// ---- printing
// ------------------------------------------------------------------------------------

void Module::pretty_print(std::ostream& stream) const {
  std::vector<std::string> extra_lines;
  const std::string extra = extra_repr();
  if (!extra.empty()) {
    std::istringstream in(extra);
    for (std::string line; std::getline(in, line);) extra_lines.push_back(line);
  }
  std::vector<std::string> child_lines;
  for (const auto& c : children_) {
    std::ostringstream child;
    c.value()->pretty_print(child);
    child_lines.push_back("(" + c.key() + "): " + add_indent(child.str(), 2));
  }
  stream << name() << '(';
  if (extra_lines.size() == 1 && child_lines.empty()) {
    stream << extra_lines[0];
  } else if (!extra_lines.empty() || !child_lines.empty()) {
    for (const auto* lines : {&extra_lines, &child_lines}) {
      for (const std::string& line : *lines) stream << "\n  " << line;
    }
    stream << '\n';
  }
  stream << ')';
}

std::ostream& operator<<(std::ostream& stream, const Module& module) {
  module.pretty_print(stream);
  return stream;
}

}  // namespace ferry::nn
