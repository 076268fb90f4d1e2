// `ferry explain`: builds the copy described on the command line (a source made from a shape by
// permute/slice/expand, a destination dtype and memory format) and prints what copy_ does with
// it: the route copy_impl takes, the operands' byte strides at each stage of the iterator
// (broadcast, reordered, coalesced), temporaries, the kernel and tiling the CPU planner picks,
// and the thread count. It runs the same functions copy_ runs (ferry/ops/copy.h), so what it
// prints is what happens. docs/explain.md has examples.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ferry/backends/cpu/copy_kernel.h"
#include "ferry/backends/cpu/cpu_target.h"
#include "ferry/ferry.h"
#include "ferry/iter/parallel.h"
#include "ferry/iter/stride_order.h"
#include "ferry/ops/copy.h"
#include "ferry/ops/device_copy.h"
#include "tools/command.h"

namespace ferry::tools {
namespace {

// Why the copy kernels run on the target they do: forced by FERRY_CPU_TARGET, or the best.
std::string simd_target_origin() {
  const char* env = std::getenv("FERRY_CPU_TARGET");
  if (env != nullptr && *env != '\0') return std::string("FERRY_CPU_TARGET=") + env;
  return "the best this CPU supports; FERRY_CPU_TARGET=avx512|avx2|scalar forces one";
}

// ferry's names of the targets this CPU supports, best first, each after a space.
std::string supported_targets() {
  std::string out;
  for (const std::string& t : cpu::simd_targets()) out += " " + cpu::cpu_target_alias(t);
  return out;
}

struct ExplainOptions {
  std::string shape;
  std::string permute;
  std::vector<std::string> slices;
  std::string expand;
  std::string src_dtype = "f32";
  std::string dst_dtype;
  std::string dst_format = "contiguous";
  int threads = 0;
  bool conj = false;
  bool neg = false;
  bool into_source = false;
  bool run = false;
  std::string src_device = "cpu";
  std::string dst_device = "cpu";
  bool non_blocking = false;
  bool pinned = false;
};

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, sep)) parts.push_back(part);
  if (!text.empty() && text.back() == sep) parts.emplace_back();
  return parts;
}

int64_t parse_int(const std::string& text, const char* what) {
  size_t used = 0;
  int64_t v = 0;
  bool ok = !text.empty();
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    ok = false;
  }
  FERRY_CHECK(ok && used == text.size(), what, ": expected an integer, but got \"", text, "\"");
  return v;
}

DimVector parse_ints(const std::string& text, const char* what) {
  DimVector out;
  if (text.empty()) return out;
  for (const std::string& p : split(text, ',')) out.push_back(parse_int(p, what));
  return out;
}

MemoryFormat parse_format(const std::string& name) {
  if (name == "contiguous" || name == "contiguous_format") return MemoryFormat::Contiguous;
  if (name == "channels_last") return MemoryFormat::ChannelsLast;
  if (name == "channels_last_3d") return MemoryFormat::ChannelsLast3d;
  if (name == "preserve" || name == "preserve_format") return MemoryFormat::Preserve;
  FERRY_FAIL_AS(Error,
                "--dst-format: expected contiguous, channels_last, channels_last_3d or "
                "preserve, but got \"",
                name, "\"");
}

// "DIM:START:END:STEP"; END may be empty (to the end), STEP omitted (1).
Tensor apply_slice(const Tensor& t, const std::string& spec) {
  const std::vector<std::string> f = split(spec, ':');
  FERRY_CHECK(f.size() >= 2 && f.size() <= 4,
              "--slice: expected DIM:START[:END[:STEP]], but got \"", spec, "\"");
  const int64_t dim = parse_int(f[0], "--slice dim");
  const int64_t start = f[1].empty() ? 0 : parse_int(f[1], "--slice start");
  std::optional<int64_t> end;
  if (f.size() > 2 && !f[2].empty()) end = parse_int(f[2], "--slice end");
  const int64_t step = f.size() > 3 && !f[3].empty() ? parse_int(f[3], "--slice step") : 1;
  return t.slice(dim, start, end, step);
}

std::string str(IntArrayRef v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

std::string describe_tensor(const Tensor& t) {
  std::ostringstream out;
  out << dtype_name(t.dtype()) << " sizes " << t.sizes() << " strides " << t.strides() << " offset "
      << t.storage_offset();
  if (t.is_conj()) out << " conj";
  if (t.is_neg()) out << " neg";
  if (!t.is_non_overlapping_and_dense()) {
    out << " (not dense)";
  } else if (t.is_contiguous()) {
    out << " (contiguous)";
  } else if (t.is_contiguous(MemoryFormat::ChannelsLast)) {
    out << " (channels_last)";
  } else {
    out << " (dense, permuted)";
  }
  return out.str();
}

void print_stage(const char* name, IntArrayRef shape, IntArrayRef dst, IntArrayRef src) {
  std::printf("  %-22s %-24s %-28s %s\n", name, str(shape).c_str(), str(dst).c_str(),
              str(src).c_str());
}

// Median wall time of a few runs of dst.copy_(src), after a warm-up run; device work is waited
// for, so a non-blocking copy is timed to its completion.
double time_copy_ms(Tensor& dst, const Tensor& src, bool non_blocking) {
  const auto copy_and_wait = [&] {
    dst.copy_(src, non_blocking);
    device_synchronize(dst.device());
    device_synchronize(src.device());
  };
  copy_and_wait();
  std::vector<double> ms;
  for (int i = 0; i < 7; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    copy_and_wait();
    const auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// The device half of the walk (DESIGN.md, step 4): the device copy policy's plan, the streams
// the work is queued on and where the host or a stream waits.
void explain_device_copy(const Tensor& dst, const Tensor& src, const TensorIterator& iter,
                         bool non_blocking) {
  const DeviceCopyPlan plan = plan_device_copy(iter, non_blocking);
  const std::string type(
      device_type_name(src.is_cpu() ? dst.device().type() : src.device().type()));
  std::printf("device type: %s (copy_stub[%s]: the device copy policy)\n", type.c_str(),
              type.c_str());
  std::printf("plan: %s\n", plan.describe().c_str());
  if (plan.path == DeviceCopyPath::kKernel || plan.path == DeviceCopyPath::kPeerKernel) {
    std::printf("device kernel: %s\n", cpu::plan_copy(copy_problem_from(iter)).describe().c_str());
  }
  if (!dst.is_cpu() && !src.is_cpu()) {
    const Stream copy_stream = current_stream(src.device());
    std::printf("stream: %s (the source device's current stream)\n", copy_stream.str().c_str());
    if (dst.device() != src.device()) {
      std::printf(
          "synchronization: %s waits for an event recorded on %s before the copy; %s waits "
          "for an event recorded on %s after it; the host does not wait\n",
          copy_stream.str().c_str(), current_stream(dst.device()).str().c_str(),
          current_stream(dst.device()).str().c_str(), copy_stream.str().c_str());
    } else {
      std::printf("synchronization: none (stream order); the host does not wait\n");
    }
    return;
  }
  const Tensor& host = dst.is_cpu() ? dst : src;
  const Stream stream = current_stream(dst.is_cpu() ? src.device() : dst.device());
  std::printf("stream: %s (the device's current stream)\n", stream.str().c_str());
  if (!non_blocking) {
    std::printf("synchronization: the host synchronizes %s before copy_ returns\n",
                stream.str().c_str());
  } else if (host.is_pinned()) {
    std::printf(
        "synchronization: none; an event recorded on %s keeps the pinned host block from "
        "reuse until the copy is done\n",
        stream.str().c_str());
  } else {
    std::printf(
        "synchronization: the host memory is pageable, so the call returns only once the host "
        "side of the copy is done (as cudaMemcpyAsync does); pin it to overlap\n");
  }
}

int run_explain(const ExplainOptions& o) {
  if (o.threads > 0) set_num_threads(o.threads);
  const ScalarType src_type = parse_scalar_type(o.src_dtype);
  const ScalarType dst_type = o.dst_dtype.empty() ? src_type : parse_scalar_type(o.dst_dtype);
  const MemoryFormat format = parse_format(o.dst_format);

  // The source: a fresh tensor of --shape, then the views, in the order the options list them.
  const Device src_device = checked_device(Device(o.src_device));
  const Device dst_device = checked_device(Device(o.dst_device));
  const bool on_devices = !src_device.is_cpu() || !dst_device.is_cpu();
  FERRY_CHECK(!o.into_source || !on_devices,
              "--into-source: expected cpu tensors, but got --src-device ", src_device,
              " and --dst-device ", dst_device);
  Tensor base = empty(
      parse_ints(o.shape, "--shape"),
      TensorOptions(src_type).device(src_device).pinned_memory(o.pinned && src_device.is_cpu()));
  if (o.run) base.zero_();
  Tensor src = base;
  std::string recipe = "empty(" + str(base.sizes()) + ")";
  if (!o.permute.empty()) {
    src = src.permute(parse_ints(o.permute, "--permute"));
    recipe += ".permute(" + o.permute + ")";
  }
  for (const std::string& s : o.slices) {
    src = apply_slice(src, s);
    recipe += ".slice(" + s + ")";
  }
  if (!o.expand.empty()) {
    src = src.expand(parse_ints(o.expand, "--expand"));
    recipe += ".expand(" + o.expand + ")";
  }
  if (o.conj) {
    FERRY_CHECK_AS(DTypeError, src.is_complex(),
                   "--conj: expected a complex source dtype, but got ", src_type);
    src = src.conj();
  }
  if (o.neg) src = src._neg_view();

  // The destination: new memory in --dst-format, or the source's own bytes with --into-source.
  Tensor dst;
  if (o.into_source) {
    FERRY_CHECK(dst_type == src_type,
                "--into-source: expected the destination dtype to be the "
                "source's (",
                src_type, "), but got ", dst_type);
    const DimVector strides = format == MemoryFormat::Preserve
                                  ? contiguous_strides(src.sizes())
                                  : strides_for_memory_format(src.sizes(), format);
    dst = base.as_strided(src.sizes(), strides, 0);
  } else if (format == MemoryFormat::Preserve) {
    // What clone() and to() allocate.
    dst = empty_like(
        src,
        TensorOptions(dst_type).device(dst_device).pinned_memory(o.pinned && dst_device.is_cpu()));
  } else {
    dst = empty(src.sizes(), TensorOptions(dst_type)
                                 .device(dst_device)
                                 .memory_format(format)
                                 .pinned_memory(o.pinned && dst_device.is_cpu()));
  }

  std::printf("dst.copy_(src)\n");
  std::printf("  src  %s\n       = %s\n", describe_tensor(src).c_str(), recipe.c_str());
  std::printf("  dst  %s%s\n", describe_tensor(dst).c_str(),
              o.into_source ? ", over the source's storage" : "");
  const CopyRoute route = copy_route(dst, src);
  std::printf("route: %s\n", copy_route_name(route));
  if (route == CopyRoute::kNothing) return 0;

  CopyProblem problem;
  std::string temporaries = "none";
  if (route == CopyRoute::kDenseCpu) {
    problem = dense_copy_problem(dst, src);
    std::printf("byte strides (no iterator: both row-major with the same sizes)\n");
    print_stage("one run", problem.sizes, problem.dst_strides, problem.src_strides);
  } else {
    Tensor source = src;
    if (route == CopyRoute::kIteratorViaCopy) {
      source = copy_of_source(src);
      std::ostringstream t;
      t << "the source is first copied to new memory (" << source.storage().nbytes()
        << " bytes, sizes " << source.sizes() << ", strides " << source.strides()
        << "), because it partly overlaps the destination; filling it is a copy of its own, "
           "which this command without --into-source explains";
      temporaries = t.str();
    }
    IterBuildTrace trace;
    const TensorIterator iter = build_copy_iterator(dst, source, &trace);
    std::printf("byte strides            %-24s %-28s %s\n", "shape", "dst", "src");
    print_stage("broadcast", trace.broadcast_shape, trace.broadcast_strides[0],
                trace.broadcast_strides[1]);
    const std::string perm = "reordered, perm " + str(trace.perm);
    std::printf("  %s\n", perm.c_str());
    print_stage("  (fastest first)", trace.reordered_shape, trace.reordered_strides[0],
                trace.reordered_strides[1]);
    print_stage("coalesced", iter.shape(), iter.strides(0), iter.strides(1));
    if (iter.numel() == 0) {
      std::printf("no elements: copy_ returns after building the iterator\n");
      return 0;
    }
    if (on_devices) {
      explain_device_copy(dst, source, iter, o.non_blocking);
      if (o.run) {
        const double ms = time_copy_ms(dst, src, o.non_blocking);
        std::printf("measured: %.4f ms to completion (median of 7 runs)\n", ms);
      }
      return 0;
    }
    problem = copy_problem_from(iter);
  }
  const cpu::CopyPlan plan = cpu::plan_copy(problem);
  const int64_t n = problem.numel();
  if (route == CopyRoute::kDenseCpu) {
    std::printf("kernel call: cpu::plan_copy + cpu::run_copy, directly (no copy_stub)\n");
  } else {
    std::printf("device type: cpu (copy_stub[cpu]: cpu::plan_copy + cpu::run_copy)\n");
  }
  std::printf("conversion: %s -> %s%s%s\n", std::string(dtype_name(problem.src_dtype)).c_str(),
              std::string(dtype_name(problem.dst_dtype)).c_str(),
              problem.conj ? ", conjugated" : "", problem.neg ? ", negated" : "");
  std::printf("kernel: %s\n", plan.describe().c_str());
  std::printf("walk: %s\n", cpu::describe_walk(problem, plan).c_str());
  std::printf("simd target: %s (%s; supported here:%s)\n", plan.simd_target,
              simd_target_origin().c_str(), supported_targets().c_str());
  std::printf("threads: %d of %d (get_num_threads), workers on CPUs %s\n", plan.threads,
              get_num_threads(), detail::pool_cpu_list().c_str());
  std::printf("temporaries: %s\n", temporaries.c_str());
  const double bytes =
      static_cast<double>(n) *
      static_cast<double>(element_size(problem.dst_dtype) + element_size(problem.src_dtype));
  std::printf("elements: %lld, bytes (written + read, a broadcast read counted each time): %.0f\n",
              static_cast<long long>(n), bytes);
  if (o.run) {
    const double ms = time_copy_ms(dst, src, o.non_blocking);
    std::printf("measured: %.4f ms (median of 7 runs), %.2f GB/s\n", ms, bytes / (ms * 1e6));
  }
  return 0;
}

constexpr const char* kExplainHelp =
    "Print how copy_ handles a copy: the route (early exit, dense fast path, iterator, or a\n"
    "temporary for a partly overlapping source), the operands' byte strides after broadcasting,\n"
    "after reordering (dimension 0 fastest) and after coalescing, the kernel and tiling the CPU\n"
    "planner picks, threads and temporaries.\n"
    "The source is empty(--shape) of --src-dtype, then --permute, each --slice in order, then\n"
    "--expand, --conj and --neg. The destination is new memory of --dst-dtype in --dst-format\n"
    "with the source's sizes (or, with --into-source, the source's own storage).\n"
    "With --src-device/--dst-device on a device (sim, cuda) it prints the device copy plan\n"
    "instead of the CPU kernel: memcpy, device kernel, peer kernel or staged temporaries, the\n"
    "stream the work is queued on and the synchronization points.\n"
    "Example:\n"
    "  ferry explain --shape 32,64,56,56 --permute 0,2,3,1 --slice 3:0:56:2 \\\n"
    "      --src-dtype f32 --dst-dtype bf16 --dst-format contiguous --threads 2";

FERRY_REGISTER_COMMAND(
    "explain", "Explain how copy_ runs a given copy: strides, kernel, tiling, threads",
    [](CLI::App& sub) -> std::function<int()> {
      auto o = std::make_shared<ExplainOptions>();
      sub.footer(kExplainHelp);
      sub.add_option("--shape", o->shape, "Sizes of the source's base tensor, e.g. 32,64,56,56")
          ->required();
      sub.add_option("--permute", o->permute, "Permute the source's dims, e.g. 0,2,3,1");
      sub.add_option("--slice", o->slices,
                     "Slice the source: DIM:START[:END[:STEP]] (END empty = to the end); "
                     "repeatable, applied after --permute")
          ->take_all();
      sub.add_option("--expand", o->expand,
                     "Expand (broadcast) the source to these sizes, e.g. 4096,4096");
      sub.add_option("--src-dtype", o->src_dtype, "Source dtype (f32, bf16, f16, i64, c64, ...)")
          ->capture_default_str();
      sub.add_option("--dst-dtype", o->dst_dtype, "Destination dtype (default: the source's)");
      sub.add_option("--dst-format", o->dst_format,
                     "Destination layout: contiguous, channels_last, channels_last_3d, or "
                     "preserve (what clone() and to() allocate)")
          ->capture_default_str();
      sub.add_option("--threads", o->threads, "Threads for the copy (default: get_num_threads())");
      sub.add_flag("--conj", o->conj, "Give the source a lazy conj bit (complex dtypes)");
      sub.add_flag("--neg", o->neg, "Give the source a lazy neg bit");
      sub.add_flag("--into-source", o->into_source,
                   "Write into the source's own storage (laid out in --dst-format) to see the "
                   "overlap handling");
      sub.add_flag("--run", o->run, "Also run the copy and print its median time");
      sub.add_option("--src-device", o->src_device, "Device of the source (cpu, sim:0, cuda:0)")
          ->capture_default_str();
      sub.add_option("--dst-device", o->dst_device,
                     "Device of the destination (cpu, sim:1, cuda:0)")
          ->capture_default_str();
      sub.add_flag("--non-blocking", o->non_blocking, "copy_(src, non_blocking=true)");
      sub.add_flag("--pinned", o->pinned, "Put the host-side tensor in pinned memory");
      return [o] { return run_explain(*o); };
    });

}  // namespace
}  // namespace ferry::tools
