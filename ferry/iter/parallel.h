// parallel_for: splits an index range over ferry's thread pool.
// The calling thread takes part; at most get_num_threads() chunks run at once, none smaller
// than the grain size (except the last). A parallel_for issued from inside another one, or
// while another thread holds the pool, runs inline on the caller: nesting never deadlocks and
// never oversubscribes the cores. The first exception thrown by a chunk is rethrown on the
// caller after every chunk has finished.
#pragma once

#include <cstdint>
#include <functional>

namespace ferry {

// Threads used by parallel regions, the caller included. Default: FERRY_NUM_THREADS if set,
// else the number of cores.
int get_num_threads();
// Sets the number of threads (>= 1); raises ferry::Error otherwise.
void set_num_threads(int n);
// True on a thread that is running a chunk of a parallel region.
bool in_parallel_region();

// Calls fn(chunk_begin, chunk_end) over [begin, end) in chunks of at least `grain_size`.
void parallel_for(int64_t begin, int64_t end, int64_t grain_size,
                  const std::function<void(int64_t, int64_t)>& fn);

// How many chunks parallel_for would use for this range right now (1 means inline).
int parallel_chunks(int64_t range, int64_t grain_size);

}  // namespace ferry
