// Module state: state_dict, load_state_dict and Module::load (a safetensors file into a built
// module). Both loads check everything first (missing and unexpected keys, shapes) and raise
// PyTorch's message before any byte is copied, so a failed load leaves the module as it was.
// Module::load reads the file straight into the module's tensors where the dtype and layout
// allow, and otherwise into a temporary on the tensor's device that is then converted there.
#include <algorithm>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "ferry/autograd/grad_mode.h"
#include "ferry/core/error.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"
#include "ferry/nn/module.h"
#include "ferry/nn/progress.h"
#include "ferry/nn/safetensors_io.h"
#include "ferry/nn/transfer.h"
#include "ferry/ops/factories.h"

namespace ferry::nn {
namespace {

std::string shape_str(IntArrayRef shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

std::string quoted_list(const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& k : keys) out += (out.empty() ? "\"" : ", \"") + k + "\"";
  return out;
}

// The keys of `own` and `theirs` (name -> shape) compared as PyTorch's load_state_dict does;
// raises its message when anything is wrong.
LoadStateDictResult check_keys(
    const std::string& module_name, const TensorDict& own,
    const std::vector<std::pair<std::string, std::vector<int64_t>>>& theirs, bool strict) {
  LoadStateDictResult result;
  std::vector<std::string> errors;
  std::unordered_set<std::string> their_names;
  for (const auto& [name, shape] : theirs) {
    their_names.insert(name);
    const Tensor* mine = own.find(name);
    if (mine == nullptr) {
      result.unexpected_keys.push_back(name);
      continue;
    }
    if (!mine->sizes().equals(shape)) {
      errors.push_back("size mismatch for " + name + ": copying a param with shape " +
                       shape_str(shape) + " from checkpoint, the shape in current model is " +
                       shape_str(mine->sizes()) + ".");
    }
  }
  for (const auto& item : own) {
    if (their_names.count(item.key()) == 0) result.missing_keys.push_back(item.key());
  }
  if (strict) {
    if (!result.unexpected_keys.empty()) {
      errors.insert(errors.begin(), "Unexpected key(s) in state_dict: " +
                                        quoted_list(result.unexpected_keys) + ". ");
    }
    if (!result.missing_keys.empty()) {
      errors.insert(errors.begin(),
                    "Missing key(s) in state_dict: " + quoted_list(result.missing_keys) + ". ");
    }
  }
  if (!errors.empty()) {
    std::string message = "Error(s) in loading state_dict for " + module_name + ":";
    for (const std::string& e : errors) message += "\n\t" + e;
    FERRY_FAIL_AS(Error, message);
  }
  return result;
}

}  // namespace

void Module::state_into(const std::string& prefix, TensorDict& out, bool detached) const {
  for (const auto& p : parameters_) {
    if (p.value().defined()) {
      out.insert(prefix + p.key(), detached ? p.value().detach() : p.value());
    }
  }
  for (const auto& b : buffers_) {
    if (b.value().defined() && non_persistent_.count(b.key()) == 0) {
      out.insert(prefix + b.key(), detached ? b.value().detach() : b.value());
    }
  }
  for (const auto& c : children_) c.value()->state_into(prefix + c.key() + ".", out, detached);
}

TensorDict Module::state_dict(const std::string& prefix) const {
  TensorDict out;
  state_into(prefix.empty() ? "" : prefix + ".", out, /*detached=*/true);
  return out;
}

LoadStateDictResult Module::load_state_dict(const TensorDict& state_dict, bool strict) {
  TensorDict own;
  state_into("", own, /*detached=*/false);
  std::vector<std::pair<std::string, std::vector<int64_t>>> theirs;
  theirs.reserve(state_dict.size());
  for (const auto& item : state_dict) {
    FERRY_CHECK(item.value().defined(), "load_state_dict: entry '", item.key(), "' is undefined");
    theirs.emplace_back(
        item.key(), std::vector<int64_t>(item.value().sizes().begin(), item.value().sizes().end()));
  }
  LoadStateDictResult result = check_keys(name(), own, theirs, strict);
  std::vector<CopyPair> pairs;
  std::unordered_set<const TensorImpl*> written;  // a shared tensor is written once
  for (const auto& item : state_dict) {
    const Tensor* mine = own.find(item.key());
    if (mine == nullptr || !written.insert(mine->impl()).second) continue;
    pairs.push_back({*mine, item.value()});
  }
  batched_copy(pairs, /*non_blocking=*/false);
  return result;
}

LoadStateDictResult Module::load(const std::string& path, std::optional<Device> device, bool strict,
                                 safetensors::LoadOptions options) {
  autograd::NoGradGuard no_grad;
  using safetensors::TensorInfo;
  const safetensors::detail::File file(path, options.read_mode == safetensors::ReadMode::kDirect);
  const safetensors::Header& header = file.header();
  TensorDict own;
  state_into("", own, /*detached=*/false);
  std::vector<std::pair<std::string, std::vector<int64_t>>> theirs;
  theirs.reserve(header.tensors.size());
  for (const TensorInfo& t : header.tensors) theirs.emplace_back(t.name, t.shape);
  LoadStateDictResult result = check_keys(name(), own, theirs, strict);

  // The module's tensors the file fills (a shared tensor once, under its first name in the file).
  std::unordered_map<const TensorImpl*, const TensorInfo*> filled;
  std::vector<std::pair<Tensor, const TensorInfo*>> order;
  for (const TensorInfo& t : header.tensors) {
    const Tensor* mine = own.find(t.name);
    if (mine != nullptr && filled.emplace(mine->impl(), &t).second) order.emplace_back(*mine, &t);
  }
  if (device) {
    // Tensors the file fills get new memory on the device without a copy; the rest are moved.
    move(*device, std::nullopt, options.non_blocking,
         [&](const Tensor& t) { return filled.count(t.impl()) != 0; });
  }
  std::vector<safetensors::detail::ReadTarget> targets;
  std::vector<CopyPair> conversions;
  uint64_t total = 0;
  for (const auto& [mine, info] : order) {
    total += info->nbytes();
    if (mine.dtype() == info->dtype && mine.is_contiguous() && !mine.is_conj() && !mine.is_neg()) {
      targets.push_back({info, mine});
      continue;
    }
    Tensor staged = empty(info->shape, TensorOptions(info->dtype).device(mine.device()));
    targets.push_back({info, staged});
    conversions.push_back({mine, staged});
  }
  safetensors::ProgressReporter progress(file.label(), total, options);
  try {
    safetensors::detail::read_into(file, targets, options, progress);
  } catch (const Error& e) {
    FERRY_FAIL_AS(Error, "Module::load: ", e.what(), "; ", name(),
                  "'s tensors may be partly overwritten");
  }
  // Conversions run where the tensors are: queued after the reads on the same stream.
  batched_copy(conversions, /*non_blocking=*/true);
  if (!options.non_blocking) {
    std::vector<Device> synced;
    for (const auto& [mine, info] : order) {
      const Device d = mine.device();
      if (d.is_cpu() || std::find(synced.begin(), synced.end(), d) != synced.end()) continue;
      current_stream(d).synchronize();
      synced.push_back(d);
    }
  }
  progress.finish();
  return result;
}

}  // namespace ferry::nn
