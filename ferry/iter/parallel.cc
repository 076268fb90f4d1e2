// The thread pool behind parallel_for: get_num_threads() - 1 workers that sleep on a condition
// variable between regions; the caller runs the first chunk itself. Workers run on the CPUs the
// process may use, even when an OpenMP runtime has bound the thread that starts them to one.
#include "ferry/iter/parallel.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ferry/core/error.h"

namespace ferry {
namespace {

thread_local bool t_in_region = false;
thread_local int t_thread_cap = detail::kMaxThreads;  // ThreadCapGuard's

}  // namespace

namespace detail {

int num_threads_from_env(const char* value) {
  if (value == nullptr || *value == '\0') return available_cores();
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(value, &end, 10);
  FERRY_CHECK(end != value && *end == '\0' && errno == 0 && n >= 1 && n <= kMaxThreads,
              "FERRY_NUM_THREADS: expected an integer between 1 and ", kMaxThreads, ", but got \"",
              value, "\"");
  return static_cast<int>(n);
}

namespace {

// The CPUs of every place of the OpenMP runtime loaded in this process, when it binds threads.
std::optional<cpu_set_t> openmp_places_cpus() {
  // Looked up, not linked: ferry does not depend on an OpenMP runtime, oneDNN brings one.
  using CountFn = int (*)();
  using PlaceCountFn = int (*)(int);
  using PlaceIdsFn = void (*)(int, int*);
  const auto num_places = reinterpret_cast<CountFn>(dlsym(RTLD_DEFAULT, "omp_get_num_places"));
  const auto place_procs =
      reinterpret_cast<PlaceCountFn>(dlsym(RTLD_DEFAULT, "omp_get_place_num_procs"));
  const auto place_ids =
      reinterpret_cast<PlaceIdsFn>(dlsym(RTLD_DEFAULT, "omp_get_place_proc_ids"));
  if (num_places == nullptr || place_procs == nullptr || place_ids == nullptr) return std::nullopt;
  const int places = num_places();
  if (places <= 0) return std::nullopt;  // no binding: threads keep the mask they inherit
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> ids;
  for (int place = 0; place < places; ++place) {
    ids.assign(static_cast<size_t>(std::max(place_procs(place), 0)), 0);
    if (!ids.empty()) place_ids(place, ids.data());
    for (int cpu : ids) {
      if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
    }
  }
  if (CPU_COUNT(&set) == 0) return std::nullopt;
  return set;
}

// This thread's affinity mask together with the OpenMP places (parallel.h, available_cores).
std::optional<cpu_set_t> pool_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return std::nullopt;
  if (const auto places = openmp_places_cpus()) CPU_OR(&set, &set, &*places);
  if (CPU_COUNT(&set) == 0) return std::nullopt;
  return set;
}

}  // namespace

std::string pool_cpu_list() {
  const auto set = pool_cpus();
  if (!set) return "unknown";
  std::string out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &*set)) continue;
    int last = cpu;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &*set)) ++last;
    if (!out.empty()) out += ',';
    out += std::to_string(cpu);
    if (last > cpu) out += '-' + std::to_string(last);
    cpu = last;
  }
  return out;
}

void use_pool_cpus() {
  if (const auto set = pool_cpus()) pthread_setaffinity_np(pthread_self(), sizeof(*set), &*set);
}

int available_cores() {
  // The CPUs this process may run on (taskset, cpusets), which can be fewer than the machine's.
  if (const auto set = pool_cpus()) return std::min(CPU_COUNT(&*set), kMaxThreads);
  return static_cast<int>(
      std::clamp(std::thread::hardware_concurrency(), 1u, static_cast<unsigned>(kMaxThreads)));
}

}  // namespace detail

namespace {

class ThreadPool {
 public:
  // Throws when FERRY_NUM_THREADS is malformed; the function-local static holding the pool is
  // then left unconstructed, so every later use raises the same error.
  ThreadPool() : num_threads_(detail::num_threads_from_env(std::getenv("FERRY_NUM_THREADS"))) {}
  ~ThreadPool() { stop_workers(); }

  int num_threads() const { return num_threads_.load(std::memory_order_relaxed); }

  void set_num_threads(int n) {
    std::lock_guard region(region_mutex_);
    stop_workers();
    num_threads_.store(n, std::memory_order_relaxed);
  }

  // Runs chunks [0, chunks) of a region; returns false (having run nothing) if the pool is
  // busy with another region.
  bool run(int chunks, const std::function<void(int)>& chunk_fn) {
    std::unique_lock region(region_mutex_, std::try_to_lock);
    if (!region.owns_lock()) return false;
    start_workers(num_threads() - 1);
    {
      std::lock_guard lock(mutex_);
      task_ = &chunk_fn;
      total_chunks_ = chunks;
      next_chunk_.store(1, std::memory_order_relaxed);
      pending_ = chunks - 1;
      error_ = nullptr;
      ++generation_;
    }
    work_ready_.notify_all();
    run_chunk(0, chunk_fn);
    // The caller also steals chunks that no worker has picked up yet.
    for (int c; (c = next_chunk_.fetch_add(1, std::memory_order_relaxed)) < chunks;) {
      run_chunk(c, chunk_fn);
      finish_chunk();
    }
    std::unique_lock lock(mutex_);
    // Also wait for workers that joined this region to leave it, so that none of them can
    // mistake the next region's chunk counter for this one's.
    work_done_.wait(lock, [&] { return pending_ == 0 && active_workers_ == 0; });
    task_ = nullptr;
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    return true;
  }

 private:
  void run_chunk(int c, const std::function<void(int)>& fn) {
    t_in_region = true;
    try {
      fn(c);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    t_in_region = false;
  }

  void finish_chunk() {
    std::lock_guard lock(mutex_);
    if (--pending_ == 0 && active_workers_ == 0) work_done_.notify_one();
  }

  void worker_loop() {
    uint64_t seen = 0;
    while (true) {
      const std::function<void(int)>* task;
      int chunks;
      {
        std::unique_lock lock(mutex_);
        work_ready_.wait(lock, [&] { return stopping_ || (task_ && generation_ != seen); });
        if (stopping_) return;
        seen = generation_;
        task = task_;
        chunks = total_chunks_;
        ++active_workers_;
      }
      for (int c; (c = next_chunk_.fetch_add(1, std::memory_order_relaxed)) < chunks;) {
        run_chunk(c, *task);
        finish_chunk();
      }
      std::lock_guard lock(mutex_);
      if (--active_workers_ == 0 && pending_ == 0) work_done_.notify_one();
    }
  }

  void start_workers(int n) {
    // A worker inherits the starting thread's CPU mask; under OMP_PROC_BIND that is one place,
    // and every worker would share the caller's CPU. Workers take the process's CPUs instead.
    while (static_cast<int>(workers_.size()) < n) {
      workers_.emplace_back([this] {
        detail::use_pool_cpus();
        worker_loop();
      });
    }
  }

  void stop_workers() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    work_ready_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
    std::lock_guard lock(mutex_);
    stopping_ = false;
  }

  std::atomic<int> num_threads_;
  std::mutex region_mutex_;  // one region at a time
  std::mutex mutex_;         // guards the fields below
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* task_ = nullptr;
  int total_chunks_ = 0;
  std::atomic<int> next_chunk_{0};
  int pending_ = 0;
  int active_workers_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
};

ThreadPool& pool() {
  static ThreadPool instance;
  return instance;
}

}  // namespace

int get_num_threads() { return pool().num_threads(); }

void set_num_threads(int n) {
  FERRY_CHECK(n >= 1, "set_num_threads: expected at least 1 thread, but got ", n);
  pool().set_num_threads(n);
}

bool in_parallel_region() { return t_in_region; }

int region_threads() { return t_in_region ? 1 : std::min(get_num_threads(), t_thread_cap); }

ThreadCapGuard::ThreadCapGuard(int max_threads) : saved_(t_thread_cap) {
  FERRY_CHECK(max_threads >= 1, "ThreadCapGuard: expected at least 1 thread, but got ",
              max_threads);
  t_thread_cap = std::min(t_thread_cap, max_threads);
}

ThreadCapGuard::~ThreadCapGuard() { t_thread_cap = saved_; }

int parallel_chunks(int64_t range, int64_t grain_size) {
  if (range <= 0 || t_in_region) return 1;
  const int64_t by_grain =
      (range + std::max<int64_t>(grain_size, 1) - 1) / std::max<int64_t>(grain_size, 1);
  return static_cast<int>(std::clamp<int64_t>(by_grain, 1, region_threads()));
}

void parallel_for(int64_t begin, int64_t end, int64_t grain_size,
                  const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t range = end - begin;
  if (range <= 0) return;
  const int chunks = parallel_chunks(range, grain_size);
  if (chunks > 1) {
    const int64_t step = (range + chunks - 1) / chunks;
    const std::function<void(int)> chunk_fn = [&](int c) {
      const int64_t lo = begin + c * step;
      const int64_t hi = std::min(end, lo + step);
      if (lo < hi) fn(lo, hi);
    };
    if (pool().run(chunks, chunk_fn)) return;
  }
  fn(begin, end);
}

}  // namespace ferry
