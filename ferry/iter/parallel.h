// parallel_for: splits an index range over ferry's thread pool.
// The calling thread takes part; at most get_num_threads() chunks run at once, none smaller
// than the grain size (except the last). A parallel_for issued from inside another one, or
// while another thread holds the pool, runs inline on the caller: nesting never deadlocks and
// never oversubscribes the cores. The first exception thrown by a chunk is rethrown on the
// caller after every chunk has finished.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace ferry {

// Threads used by parallel regions, the caller included. Default, read when the pool is first
// used: FERRY_NUM_THREADS if set and not empty, else the number of cores this process may run on
// (its CPU affinity). A FERRY_NUM_THREADS that is not an integer in [1, 1024] is not ignored:
// every call that needs the pool (this one included) raises ferry::Error quoting the value.
int get_num_threads();
// Sets the number of threads (>= 1); raises ferry::Error otherwise.
void set_num_threads(int n);
// True on a thread that is running a chunk of a parallel region.
bool in_parallel_region();

// Threads a parallel region started on this thread may use now: get_num_threads(), at most the
// cap of a ThreadCapGuard alive on this thread, and 1 inside a parallel region.
int region_threads();

// Caps the threads of the parallel regions this thread starts while the guard lives (a nested
// guard can only lower the cap): for work that must leave CPUs to threads outside the pool, such
// as a staged copy's pack beside a sim link, whose copies run on a host thread of their own.
class ThreadCapGuard {
 public:
  explicit ThreadCapGuard(int max_threads);
  ~ThreadCapGuard();
  ThreadCapGuard(const ThreadCapGuard&) = delete;
  ThreadCapGuard& operator=(const ThreadCapGuard&) = delete;

 private:
  int saved_;
};

// Calls fn(chunk_begin, chunk_end) over [begin, end) in chunks of at least `grain_size`.
void parallel_for(int64_t begin, int64_t end, int64_t grain_size,
                  const std::function<void(int64_t, int64_t)>& fn);

// How many chunks parallel_for would use for this range right now (1 means inline).
int parallel_chunks(int64_t range, int64_t grain_size);

namespace detail {

inline constexpr int kMaxThreads = 1024;

// The default thread count for a FERRY_NUM_THREADS value (null or empty: unset), computed
// afresh on each call: the pool's rule, exposed so that tests need not restart the process.
int num_threads_from_env(const char* value);
// CPUs this process may run on (at least 1, at most kMaxThreads): the calling thread's affinity
// mask, together with every place of the OpenMP runtime when one is loaded and binds threads
// (OMP_PROC_BIND, OMP_PLACES). Such a runtime binds the initial thread to its first place; the
// pool's workers are given all of these CPUs, not that one.
int available_cores();
// The same CPUs as a list ("0-3,8"), as `ferry explain` prints them.
std::string pool_cpu_list();
// Gives the calling thread those CPUs, as the pool's workers have: for threads that ferry's own
// tools start outside the pool (a benchmark's), which would otherwise inherit an OpenMP binding.
void use_pool_cpus();

}  // namespace detail

}  // namespace ferry
