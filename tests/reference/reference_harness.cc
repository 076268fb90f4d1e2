// The comparison harness (see reference_harness.h): one run of the script per process, the
// inputs rebuilt on the device exactly as PyTorch saw them (the same contiguous base, then the
// same view), ferry's outputs and gradients compared element by element.
#include "tests/reference/reference_harness.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <typeinfo>

#include "ferry/autograd/engine.h"
#include "ferry/device/runtime.h"
#include "ferry/ops/factories.h"
#include "tests/support/random.h"
#include "tests/support/tensor_compare.h"

#ifndef FERRY_REFERENCE_PYTHON
#define FERRY_REFERENCE_PYTHON "/usr/bin/python3"
#endif
#ifndef FERRY_REFERENCE_SCRIPT
#error "FERRY_REFERENCE_SCRIPT (the path of torch_reference.py) must be defined by CMake"
#endif

namespace ferry::reference {
namespace {

using nlohmann::json;

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

std::string shell_quoted(const std::string& s) { return "'" + s + "'"; }

struct RunHolder {
  ReferenceRun run;
  bool keep = env("FERRY_REFERENCE_KEEP") != nullptr;
  ~RunHolder() {
    std::error_code ec;
    if (!run.dir.empty() && !keep) std::filesystem::remove_all(run.dir, ec);
  }
};

void make_run(RunHolder& h) {
  ReferenceRun& run = h.run;
  // CI sets FERRY_REQUIRE_TORCH=1 (as for the pytest round-trips with torch): no skipping there.
  const bool require =
      env("FERRY_REQUIRE_TORCH") != nullptr && std::string(env("FERRY_REQUIRE_TORCH")) != "0";
  auto unavailable = [&](const std::string& why) {
    (require ? run.failure : run.skip_reason) =
        why + (require ? " (and FERRY_REQUIRE_TORCH is set)" : "");
  };
  const std::string python = FERRY_REFERENCE_PYTHON;
  if (::access(python.c_str(), X_OK) != 0) {
    unavailable(python + " not found: the PyTorch comparison needs Debian's python3 and " +
                "python3-torch (scripts/install-deps.sh installs them)");
    return;
  }
  const std::filesystem::path tmp = env("TMPDIR") ? env("TMPDIR") : "/tmp";
  std::string dir = (tmp / "ferry-reference-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) {
    run.failure = "mkdtemp failed for " + dir;
    return;
  }
  run.dir = dir;
  run.command =
      shell_quoted(python) + " " + shell_quoted(FERRY_REFERENCE_SCRIPT) + " --out " +
      shell_quoted(dir) + " --seed " + std::to_string(testing::base_seed()) + " --sweep " +
      std::to_string(env("FERRY_REFERENCE_SWEEP") ? std::atoi(env("FERRY_REFERENCE_SWEEP")) : 3);
  if (const char* only = env("FERRY_REFERENCE_ONLY"))
    run.command += " --only " + shell_quoted(only);
  std::string output;
  FILE* pipe = ::popen((run.command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    run.failure = "cannot run " + run.command;
    return;
  }
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    output.append(buffer.data(), n);
  const int rc = ::pclose(pipe);
  const int status = rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  if (status == 3) {
    unavailable(python + " cannot import torch: " + output);
    return;
  }
  if (status != 0) {
    run.failure = "the PyTorch script failed (exit status " + std::to_string(status) + "):\n  " +
                  run.command + "\n" + output;
    return;
  }
  std::ifstream manifest(dir + "/manifest.json");
  run.manifest = json::parse(manifest, nullptr, /*allow_exceptions=*/false);
  if (!run.manifest.is_object()) {
    run.failure = "the script wrote no readable manifest.json into " + dir;
    return;
  }
  std::printf("%s%s", output.c_str(), h.keep ? ("  (files kept in " + dir + ")\n").c_str() : "");
}

// ---- tolerances and comparison ------------------------------------------------------------------

struct Tolerance {
  double rtol = 0, atol = 0;
};

// |ferry - torch| <= atol * max(1, max|torch|) + rtol * |torch|: the absolute part scales with
// the tensor's magnitude, so that sums that cancel are judged by the size of what they summed.
Tolerance tolerance_for(ScalarType t, double scale) {
  switch (t) {
    case kFloat64:
      return {1e-10 * scale, 1e-12 * scale};
    case kFloat32:
      return {1e-5 * scale, 1e-6 * scale};
    case kBFloat16:
      return {1.6e-2 * scale, 1e-2 * scale};
    case kFloat16:
      return {2e-3 * scale, 1e-3 * scale};
    default:
      return {};  // integers and bool: exact
  }
}

std::string index_of(int64_t flat, IntArrayRef sizes) {
  std::vector<int64_t> idx(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    idx[d] = sizes[d] ? flat % sizes[d] : 0;
    flat = sizes[d] ? flat / sizes[d] : 0;
  }
  std::ostringstream out;
  out << "[";
  for (size_t d = 0; d < idx.size(); ++d) out << (d ? ", " : "") << idx[d];
  out << "]";
  return out.str();
}

// The floating dtype with the loosest tolerance among `dtypes`: a gradient that flows through
// a float32 op into a float64 input has float32 precision, in PyTorch as in ferry.
ScalarType coarsest(const std::vector<ScalarType>& dtypes) {
  ScalarType out = kFloat64;
  for (ScalarType t : dtypes) {
    if (is_floating_point(t) && tolerance_for(t, 1).rtol > tolerance_for(out, 1).rtol) out = t;
  }
  return out;
}

// The differences between ferry's `got` and PyTorch's `want` (sizes, dtype, values); floating
// values within the tolerance of the coarser of their dtype and `precision`.
std::vector<std::string> compare(const std::string& what, const Tensor& got, const Tensor& want,
                                 ScalarType precision, double scale) {
  std::vector<std::string> out;
  if (!got.sizes().equals(want.sizes())) {
    std::ostringstream m;
    m << what << ": ferry's sizes are " << got.sizes() << ", PyTorch's " << want.sizes();
    return {m.str()};
  }
  if (got.dtype() != want.dtype()) {
    out.push_back(what + ": ferry's dtype is " + std::string(dtype_name(got.dtype())) +
                  ", PyTorch's " + std::string(dtype_name(want.dtype())));
  }
  double rtol = 0, atol = 0;
  if (is_floating_point(want.dtype()) || is_floating_point(got.dtype())) {
    for (ScalarType t : {want.dtype(), got.dtype(), precision}) {
      rtol = std::max(rtol, tolerance_for(t, scale).rtol);
      atol = std::max(atol, tolerance_for(t, scale).atol);
    }
  }
  const std::vector<double> x = testing::values_of(got), y = testing::values_of(want);
  double magnitude = 1;
  for (double v : y) {
    if (std::isfinite(v)) magnitude = std::max(magnitude, std::abs(v));
  }
  int64_t bad = 0, first = -1, worst = -1;
  double worst_excess = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i]))) continue;
    const double err = std::abs(x[i] - y[i]), allowed = atol * magnitude + rtol * std::abs(y[i]);
    if (err <= allowed) continue;
    ++bad;
    if (first < 0) first = static_cast<int64_t>(i);
    const double excess = std::isfinite(err) ? err / std::max(allowed, 1e-300) : HUGE_VAL;
    if (worst < 0 || excess > worst_excess) worst = static_cast<int64_t>(i), worst_excess = excess;
  }
  if (bad == 0) return out;
  auto at = [&](int64_t i) {
    std::ostringstream m;
    m << std::setprecision(9) << index_of(i, want.sizes()) << ": ferry "
      << x[static_cast<size_t>(i)] << ", PyTorch " << y[static_cast<size_t>(i)];
    return m.str();
  };
  std::ostringstream m;
  m << what << ": " << bad << " of " << x.size() << " elements differ (sizes " << want.sizes()
    << ", " << want.dtype() << ", rtol " << rtol << ", atol " << atol << " x " << magnitude
    << "); first " << at(first) << "; worst " << at(worst);
  out.push_back(m.str());
  return out;
}

Tensor apply_layout(const Tensor& base, const std::vector<int64_t>& shape,
                    const std::string& layout) {
  if (layout == "contiguous") return base;
  if (layout == "transposed") return base.transpose(-2, -1);
  if (layout == "permuted") {
    std::vector<int64_t> dims(static_cast<size_t>(base.dim()));
    for (size_t d = 0; d < dims.size(); ++d) dims[d] = static_cast<int64_t>(dims.size() - 1 - d);
    return base.permute(dims);
  }
  if (layout == "sliced") return base.slice(-1, 1, std::nullopt, 2);
  if (layout == "expanded") return base.expand(shape);
  if (layout == "channels_last") return base.permute({0, 3, 1, 2});
  throw CaseError("unknown layout " + layout);
}

std::string describe(const std::vector<Tensor>& outs) {
  std::ostringstream s;
  for (size_t i = 0; i < outs.size(); ++i) {
    s << (i ? ", " : "")
      << (outs[i].defined() ? std::string(dtype_name(outs[i].dtype())) : "undefined");
    if (outs[i].defined()) s << outs[i].sizes();
  }
  return outs.empty() ? "nothing" : s.str();
}

}  // namespace

std::vector<json> ReferenceRun::cases_of(const std::string& op) const {
  std::vector<json> out;
  if (!manifest.contains("cases")) return out;
  for (const json& c : manifest["cases"]) {
    if (c["op"] == op) out.push_back(c);
  }
  return out;
}

const ReferenceRun& reference_run() {
  static RunHolder holder;
  static const bool made = (make_run(holder), true);
  (void)made;
  return holder.run;
}

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::kCpu:
      return "cpu";
    case Mode::kSim:
      return "sim";
    case Mode::kSimChaos:
      return "chaos";
  }
  return "?";
}

void PrintTo(Mode mode, std::ostream* out) { *out << mode_name(mode); }

CaseResult check_case(const ReferenceRun& run, const json& entry, const OpEntry& op, Mode mode) {
  const Device device = mode == Mode::kCpu ? Device("cpu") : Device("sim:0");
  const std::string name = entry["name"].get<std::string>();
  CaseResult result;
  result.label = "case " + name + " (case seed " + std::to_string(entry["seed"].get<uint64_t>()) +
                 ") on " + device.str() + (mode == Mode::kSimChaos ? " with sim chaos" : "") +
                 "; replay with FERRY_TEST_SEED=" + std::to_string(testing::base_seed()) +
                 " FERRY_REFERENCE_ONLY=" + entry["op"].get<std::string>();
  auto fail = [&](const std::string& message) { result.failures.push_back(message); };
  auto fail_all = [&](const std::vector<std::string>& messages) {
    result.failures.insert(result.failures.end(), messages.begin(), messages.end());
  };
  // Raised ferry errors: a DispatchStub with no CPU kernel is a kernel that has not landed in
  // this build (the case is skipped, by name; a CUDA build may have the CUDA one already).
  // A stub that has a CPU kernel but none for sim is a bug like any other.
  auto raised = [&](const std::string& when, const std::string& what) {
    const size_t stub = what.find("_stub: no kernel for device type ");
    const size_t listed = what.find("kernels are registered for ");
    const bool no_cpu_kernel =
        listed == std::string::npos ||
        what.substr(listed, what.find(" (", listed) - listed).find("cpu") == std::string::npos;
    if (stub != std::string::npos && no_cpu_kernel) {
      result.missing_kernel = what;
    } else {
      fail(when + what);
    }
  };
  // Device work runs asynchronously: its errors belong to this case, not the next one.
  auto sync = [&] {
    if (device.is_sim()) device_synchronize(device);
  };
  testing::SafetensorsFile file;
  json spec;
  try {
    file = testing::read_safetensors(run.dir + "/" + entry["file"].get<std::string>());
    spec = json::parse(file.metadata.at("case"));
  } catch (const std::exception& e) {
    fail(std::string("cannot read the case file: ") + e.what());
    return result;
  }
  const double scale = spec.value("tol", 1.0);
  const json params = spec.value("params", json::object());
  std::vector<ScalarType> dtypes;
  for (const auto& [key, t] : file.tensors) dtypes.push_back(t.dtype());
  const ScalarType precision = coarsest(dtypes);
  std::vector<Tensor> inputs;
  std::vector<std::string> names;
  std::vector<Tensor> outs;
  std::string ferry_error;
  try {
    for (size_t k = 0; k < spec["inputs"].size(); ++k) {
      const json& in = spec["inputs"][k];
      names.push_back(spec["args"][k].get<std::string>());
      if (in.is_null()) {
        inputs.emplace_back();
        continue;
      }
      Tensor base = file.get("in." + std::to_string(k));
      if (!base.defined()) throw CaseError("the file has no in." + std::to_string(k));
      if (in.value("device", "") != "cpu") base = base.to(device);
      if (in.value("grad", is_floating_point(base.dtype()))) base.requires_grad_();
      inputs.push_back(apply_layout(base, in["shape"].get<std::vector<int64_t>>(),
                                    in.value("layout", "contiguous")));
    }
    sync();
    const Call call(inputs, names, params);
    outs = op.fn(call);
    sync();
  } catch (const Error& e) {
    ferry_error = e.what();
  } catch (const CaseError& e) {
    fail(std::string("the case cannot be run (case table): ") + e.what());
    return result;
  } catch (const std::exception& e) {
    fail(std::string("a non-ferry exception (") + typeid(e).name() + "): " + e.what());
    return result;
  }
  const auto torch_error = file.metadata.find("error");
  if (torch_error != file.metadata.end()) {
    if (ferry_error.empty()) {
      fail("PyTorch raises (" + torch_error->second + "), but ferry returned " + describe(outs));
    }
    return result;
  }
  if (!ferry_error.empty()) {
    raised("ferry raised, PyTorch did not: ", ferry_error);
    return result;
  }
  const std::string via = file.metadata["via_float32"] == "1"
                              ? " [PyTorch's CPU lacks this dtype here: computed in float32]"
                              : "";

  // Outputs: values, dtype, requires_grad; strides, offset and aliasing where the case asks.
  const json info = json::parse(file.metadata.at("outputs"));
  if (outs.size() != info.size()) {
    fail("ferry returned " + std::to_string(outs.size()) + " output(s), PyTorch " +
         std::to_string(info.size()));
    return result;
  }
  Tensor first;
  for (const Tensor& t : inputs) {
    if (t.defined()) {
      first = t;
      break;
    }
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    const std::string what = "output " + std::to_string(i) + via;
    if (!outs[i].defined()) {
      fail(what + " is undefined");
      continue;
    }
    fail_all(compare(what, outs[i], file.get("out." + std::to_string(i)), precision, scale));
    if (outs[i].requires_grad() != info[i]["requires_grad"].get<bool>()) {
      fail(what + ": requires_grad is " + (outs[i].requires_grad() ? "true" : "false") +
           " in ferry, the opposite in PyTorch");
    }
    if (spec.value("strides", false) && outs[i].numel() > 0) {
      std::ostringstream m;
      // The strides of size-1 dimensions address nothing: ferry and PyTorch may differ there.
      auto strides = info[i]["strides"].get<std::vector<int64_t>>();
      std::vector<int64_t> ours = outs[i].strides().vec();
      for (size_t d = 0; d < strides.size() && d < ours.size(); ++d) {
        if (outs[i].size(static_cast<int64_t>(d)) == 1) strides[d] = ours[d];
      }
      if (ours != strides) {
        m << what << ": strides " << outs[i].strides() << " in ferry, "
          << IntArrayRef(info[i]["strides"].get<std::vector<int64_t>>()) << " in PyTorch (sizes "
          << outs[i].sizes() << ")";
        fail(m.str());
      }
      if (outs[i].storage_offset() != info[i]["offset"].get<int64_t>()) {
        fail(what + ": storage offset " + std::to_string(outs[i].storage_offset()) + " in ferry, " +
             info[i]["offset"].dump() + " in PyTorch");
      }
      if (first.defined() && outs[i].is_alias_of(first) != info[i]["aliases_input"].get<bool>()) {
        fail(what + (outs[i].is_alias_of(first) ? ": shares" : ": does not share") +
             " the input's storage in ferry, PyTorch's the opposite");
      }
    }
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor after = file.get("after." + std::to_string(k));
    if (after.defined()) {
      fail_all(
          compare("input '" + names[k] + "' after the call", inputs[k], after, precision, scale));
    }
  }

  // Backward with PyTorch's random output gradients, with respect to the inputs as the op saw
  // them (the views).
  std::vector<Tensor> roots, grad_outputs, wrt;
  std::vector<size_t> wrt_index;
  for (size_t i = 0; i < outs.size(); ++i) {
    const Tensor g = file.get("grad_out." + std::to_string(i));
    if (!g.defined() || !outs[i].requires_grad()) continue;
    roots.push_back(outs[i]);
    grad_outputs.push_back(g.to(outs[i].device(), outs[i].dtype()));
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k].defined() && inputs[k].requires_grad()) {
      wrt.push_back(inputs[k]);
      wrt_index.push_back(k);
    }
  }
  if (roots.empty() || wrt.empty()) return result;
  std::vector<Tensor> grads;
  try {
    grads = autograd::grad(roots, wrt, grad_outputs, std::nullopt, false, /*allow_unused=*/true);
    sync();
  } catch (const Error& e) {
    raised("ferry's backward raised: ", e.what());
    return result;
  }
  for (size_t j = 0; j < wrt.size(); ++j) {
    const size_t k = wrt_index[j];
    Tensor want = file.get("grad." + std::to_string(k));
    Tensor got = j < grads.size() ? grads[j] : Tensor();
    if (!want.defined() && !got.defined()) continue;
    // PyTorch's None and a zero gradient mean the same; compare values either way.
    if (!want.defined()) want = zeros(got.sizes(), TensorOptions(got.dtype()));
    if (!got.defined()) got = zeros(want.sizes(), TensorOptions(want.dtype()));
    // Formulas are chains of ops that round at each step in bfloat16/float16, chained
    // differently in ferry and PyTorch: a few more ulps than one op.
    const double chain = is_reduced_floating_point(precision) ? 3 : 1;
    fail_all(compare("gradient of input " + std::to_string(k) + " ('" + names[k] + "')" + via, got,
                     want, precision, scale * chain));
  }
  return result;
}

}  // namespace ferry::reference
