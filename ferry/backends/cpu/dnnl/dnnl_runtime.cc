// The engine, the team rule, descriptors, the LRU primitive cache and execution for the oneDNN
// kernels (see dnnl_runtime.h). The cache and engine are created on first use and never
// destroyed, so that no thread can outlive them at exit.
#include "ferry/backends/cpu/dnnl/dnnl_runtime.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>
#include <optional>

#include "ferry/backends/cpu/dnnl/nn_support.h"
#include "ferry/backends/cpu/dnnl/primitive_cache.h"
#include "ferry/core/size_math.h"
#include "ferry/core/storage.h"
#include "ferry/iter/parallel.h"

namespace ferry::cpu::onednn {
namespace {

#if defined(__SANITIZE_THREAD__)
constexpr bool kSingleThreadedOmp = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kSingleThreadedOmp = true;
#else
constexpr bool kSingleThreadedOmp = false;
#endif
#else
constexpr bool kSingleThreadedOmp = false;
#endif

// Threads that running oneDNN calls hold, summed over all callers.
std::atomic<int> threads_in_use{0};

}  // namespace

const dnnl::engine& engine() {
  static const auto* cpu = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *cpu;
}

TeamScope::TeamScope() {
  const int budget = (kSingleThreadedOmp || in_parallel_region()) ? 1 : get_num_threads();
  int in_use = threads_in_use.load(std::memory_order_relaxed);
  do {
    size_ = std::clamp(budget - in_use, 1, budget);
  } while (
      !threads_in_use.compare_exchange_weak(in_use, in_use + size_, std::memory_order_relaxed));
  previous_ = omp_get_max_threads();
  if (previous_ != size_) omp_set_num_threads(size_);
}

TeamScope::~TeamScope() {
  if (previous_ != size_) omp_set_num_threads(previous_);
  threads_in_use.fetch_sub(size_, std::memory_order_relaxed);
}

dnnl::memory::data_type data_type_of(ScalarType dtype, const char* op) {
  switch (dtype) {
    case kFloat32:
      return dnnl::memory::data_type::f32;
    case kBFloat16:
      return dnnl::memory::data_type::bf16;
    case kFloat16:
      return dnnl::memory::data_type::f16;
    default:
      FERRY_FAIL_AS(DTypeError, op, ": oneDNN takes float32, bfloat16 or float16, but got ", dtype);
  }
}

dnnl::memory::dims dims_of(IntArrayRef values) {
  return dnnl::memory::dims(values.begin(), values.end());
}

dnnl::memory::desc desc_of(const Tensor& t, IntArrayRef sizes, IntArrayRef strides,
                           const char* op) {
  if (sizes.empty()) return {{1}, data_type_of(t.dtype(), op), {1}};
  return {dims_of(sizes), data_type_of(t.dtype(), op), dims_of(strides)};
}

DimVector layout_strides(const Tensor& t) {
  if (t.is_contiguous()) return contiguous_strides(t.sizes());
  if (t.dim() == 4 && t.is_contiguous(MemoryFormat::ChannelsLast)) {
    return strides_for_memory_format(t.sizes(), MemoryFormat::ChannelsLast);
  }
  return DimVector(t.strides());
}

dnnl::memory::desc desc_of(const Tensor& t, const char* op) {
  return desc_of(t, t.sizes(), layout_strides(t), op);
}

dnnl::memory memory_of(const dnnl::memory::desc& desc, const Tensor& t) {
  return dnnl::memory(desc, engine(), t.data_ptr());
}

namespace {

// One thread's scratch buffers: 64-byte aligned, grown on demand, kept for the thread's life.
class ScratchBuffers {
 public:
  static constexpr int kSlots = 4;
  ~ScratchBuffers() {
    for (auto& s : slots_) std::free(s.data);
  }
  void* get(int slot, size_t bytes) {
    Slot& s = slots_[slot];
    if (bytes > s.capacity) {
      const size_t capacity = (std::max(bytes, s.capacity * 2) + 63) / 64 * 64;
      void* data = std::aligned_alloc(64, capacity);
      FERRY_CHECK_AS(OutOfMemoryError, data != nullptr,
                     "oneDNN scratch buffer: could not allocate ", capacity, " bytes");
      std::free(s.data);
      s = {data, capacity};
    }
    return s.data;
  }

 private:
  struct Slot {
    void* data = nullptr;
    size_t capacity = 0;
  };
  Slot slots_[kSlots];
};

ScratchBuffers& scratch_buffers() {
  thread_local ScratchBuffers buffers;
  return buffers;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(engine());
  return stream;
}

}  // namespace

dnnl::memory scratch_memory(const dnnl::memory::desc& desc, int slot) {
  FERRY_CHECK(slot >= 0 && slot < ScratchBuffers::kSlots, "scratch_memory: slot ", slot,
              " is outside [0, ", ScratchBuffers::kSlots, ")");
  const size_t bytes = std::max<size_t>(desc.get_size(), 1);
  return dnnl::memory(desc, engine(), scratch_buffers().get(slot, bytes));
}

namespace {

// A host tensor over `data` (not owning it).
Tensor host_view(void* data, IntArrayRef sizes, IntArrayRef strides, ScalarType dtype) {
  const auto itemsize = static_cast<size_t>(element_size(dtype));
  const auto nbytes = static_cast<size_t>(
      checked_storage_nbytes(sizes, strides, 0, itemsize, "oneDNN memory view"));
  return make_tensor(Storage(DataPtr(data, Device(DeviceType::CPU)), nbytes), dtype, sizes,
                     strides);
}

// `mem` and `plain` as two host views of equal sizes whose elements correspond one to one: the
// dims themselves for a strided layout; for a layout blocking dimension k by b (no padding), k
// split into [dims[k] / b, b] in both, the block's stride 1 in mem's. Nothing for other layouts.
std::optional<std::pair<Tensor, Tensor>> paired_views(const dnnl::memory& mem,
                                                      const Tensor& plain) {
  const dnnl::memory::desc md = mem.get_desc();
  const dnnl_memory_desc_t& d = md.data;
  const int ndims = d.ndims;
  if (d.format_kind != dnnl_blocked || d.offset0 != 0 || ndims != plain.dim()) return std::nullopt;
  for (int i = 0; i < ndims; ++i) {
    if (d.padded_dims[i] != d.dims[i] || d.padded_offsets[i] != 0 || d.dims[i] != plain.size(i)) {
      return std::nullopt;
    }
  }
  const dnnl_blocking_desc_t& blk = d.format_desc.blocking;
  DimVector mem_sizes, mem_strides, plain_sizes, plain_strides;
  int blocked = -1;
  int64_t block = 1;
  if (blk.inner_nblks == 1) {
    blocked = static_cast<int>(blk.inner_idxs[0]);
    block = blk.inner_blks[0];
    if (blocked < 0 || blocked >= ndims || block <= 0 || d.dims[blocked] % block != 0) {
      return std::nullopt;
    }
  } else if (blk.inner_nblks != 0) {
    return std::nullopt;
  }
  for (int i = 0; i < ndims; ++i) {
    if (i == blocked) {
      mem_sizes.push_back(d.dims[i] / block);
      mem_sizes.push_back(block);
      mem_strides.push_back(blk.strides[i]);
      mem_strides.push_back(1);
      plain_sizes.push_back(d.dims[i] / block);
      plain_sizes.push_back(block);
      plain_strides.push_back(plain.stride(i) * block);
      plain_strides.push_back(plain.stride(i));
    } else {
      mem_sizes.push_back(d.dims[i]);
      mem_strides.push_back(blk.strides[i]);
      plain_sizes.push_back(plain.size(i));
      plain_strides.push_back(plain.stride(i));
    }
  }
  const ScalarType dtype = plain.scalar_type();
  if (md.data_type() != data_type_of(dtype, "reorder") ||
      static_cast<size_t>(element_size(dtype)) * plain.numel() != md.get_size()) {
    return std::nullopt;  // another data type, or a layout with gaps
  }
  return std::pair{host_view(mem.get_data_handle(), mem_sizes, mem_strides, dtype),
                   host_view(plain.data_ptr(), plain_sizes, plain_strides, dtype)};
}

}  // namespace

bool copy_into_memory(const Tensor& plain, const dnnl::memory& mem) {
  auto views = paired_views(mem, plain);
  if (!views) return false;
  if (plain.numel() > 0) views->first.copy_(views->second);
  return true;
}

bool copy_from_memory(const dnnl::memory& mem, const Tensor& plain) {
  auto views = paired_views(mem, plain);
  if (!views) return false;
  if (plain.numel() > 0) views->second.copy_(views->first);
  return true;
}

bool is_reference_impl(const dnnl::primitive_desc_base& pd) {
  const char* name = pd.impl_info_str();
  return std::strncmp(name, "ref", 3) == 0 || std::strstr(name, "_ref") != nullptr;
}

CacheKey& CacheKey::add_double(double value) {
  int64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return add(bits);
}

CacheKey& CacheKey::add(IntArrayRef values) {
  words_.push_back(static_cast<int64_t>(values.size()));
  for (int64_t v : values) words_.push_back(v);
  return *this;
}

CacheKey& CacheKey::add(const Tensor& t) {
  if (!t.defined()) return add(-1);
  add(static_cast<int64_t>(t.dtype()));
  add(t.sizes());
  return add(t.strides());
}

// ---- the cache ----------------------------------------------------------------------------

namespace {

struct KeyHash {
  using is_transparent = void;
  size_t operator()(std::span<const int64_t> words) const {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int64_t w : words) {
      h ^= static_cast<uint64_t>(w);
      h *= 0x100000001b3ULL;
      h ^= h >> 29;
    }
    return static_cast<size_t>(h);
  }
  size_t operator()(const std::vector<int64_t>& words) const {
    return (*this)(std::span<const int64_t>(words));
  }
};

struct KeyEqual {
  using is_transparent = void;
  static std::span<const int64_t> view(std::span<const int64_t> s) { return s; }
  static std::span<const int64_t> view(const std::vector<int64_t>& v) { return v; }
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    const auto x = view(a);
    const auto y = view(b);
    return x.size() == y.size() && std::equal(x.begin(), x.end(), y.begin());
  }
};

size_t default_capacity() {
  constexpr size_t kDefault = 1024;
  const char* env = std::getenv("FERRY_DNNL_CACHE_CAPACITY");
  if (env == nullptr || *env == '\0') return kDefault;
  char* end = nullptr;
  const long long value = std::strtoll(env, &end, 10);
  return (end != env && *end == '\0' && value >= 0) ? static_cast<size_t>(value) : kDefault;
}

class PrimitiveCache {
 public:
  using Entry = std::shared_ptr<const CachedPrimitive>;

  Entry find(std::span<const int64_t> key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) {
      ++stats_.misses;
      return nullptr;
    }
    ++stats_.hits;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }

  Entry insert(std::span<const int64_t> key, Entry entry) {
    std::lock_guard<std::mutex> lock(mu_);
    if (capacity_ == 0) return entry;
    auto it = index_.find(key);
    if (it != index_.end()) return it->second->second;  // another thread built it first
    lru_.emplace_front(std::vector<int64_t>(key.begin(), key.end()), std::move(entry));
    index_.emplace(lru_.front().first, lru_.begin());
    evict_to(capacity_);
    return lru_.front().second;
  }

  PrimitiveCacheStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    PrimitiveCacheStats s = stats_;
    s.entries = lru_.size();
    s.capacity = capacity_;
    return s;
  }

  void set_capacity(size_t capacity) {
    std::lock_guard<std::mutex> lock(mu_);
    capacity_ = capacity;
    evict_to(capacity_);
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    index_.clear();
    lru_.clear();
  }

 private:
  void evict_to(size_t size) {
    while (lru_.size() > size) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
      ++stats_.evictions;
    }
  }

  using Item = std::pair<std::vector<int64_t>, Entry>;
  std::mutex mu_;
  std::list<Item> lru_;  // most recently used first
  std::unordered_map<std::vector<int64_t>, std::list<Item>::iterator, KeyHash, KeyEqual> index_;
  size_t capacity_ = default_capacity();
  PrimitiveCacheStats stats_;
};

PrimitiveCache& cache() {
  static auto* instance = new PrimitiveCache;
  return *instance;
}

}  // namespace

std::shared_ptr<const CachedPrimitive> find_or_build(CacheKey key, const TeamScope& team,
                                                     BuildFn build) {
  key.add(team.size());
  if (auto hit = cache().find(key.words())) return hit;
  std::shared_ptr<const CachedPrimitive> built = build();
  return cache().insert(key.words(), std::move(built));
}

dnnl::primitive_attr default_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

void execute(const dnnl::primitive& primitive, std::unordered_map<int, dnnl::memory>& args,
             size_t scratchpad_bytes) {
  if (scratchpad_bytes > 0) {
    const dnnl::memory::desc bytes({static_cast<int64_t>(scratchpad_bytes)},
                                   dnnl::memory::data_type::u8, dnnl::memory::format_tag::a);
    args.insert_or_assign(DNNL_ARG_SCRATCHPAD, scratch_memory(bytes, 0));
  }
  dnnl::stream& stream = thread_stream();
  primitive.execute(stream, args);
  stream.wait();
}

void execute(const CachedPrimitive& entry, std::unordered_map<int, dnnl::memory>& args) {
  execute(entry.primitive, args, entry.scratchpad_bytes);
}

void rethrow(const dnnl::error& e, const char* primitive, const std::string& shapes) {
  const std::string message = std::string("oneDNN ") + primitive + " failed for " + shapes + ": " +
                              e.what() + " (dnnl_status " + std::to_string(e.status) + ")";
  switch (e.status) {
    case dnnl_unimplemented:
      FERRY_FAIL_AS(NotImplementedError, message);
    case dnnl_out_of_memory:
      FERRY_FAIL_AS(OutOfMemoryError, message);
    default:
      FERRY_FAIL_AS(Error, message);
  }
}

}  // namespace ferry::cpu::onednn

namespace ferry::cpu {

PrimitiveCacheStats primitive_cache_stats() { return onednn::cache().stats(); }
void set_primitive_cache_capacity(size_t capacity) { onednn::cache().set_capacity(capacity); }
void clear_primitive_cache() { onednn::cache().clear(); }

}  // namespace ferry::cpu
