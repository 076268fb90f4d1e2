// A sim stream: one worker thread (started on first use) draining an in-order queue of
// operations, and sim events, which mark positions in such a queue.
// Invariants: operation n of a stream starts only after operation n-1 finished; completed() is
// published with release semantics after an operation's effects, so a thread that observes it
// (query, wait, synchronize, a waiting stream's worker) also observes the memory it wrote.
// Waiting spins only briefly (kSpin, the time two thread wake-ups cost on a VM) before sleeping
// on a condition variable: short copies then cost a few microseconds rather than two wake-ups.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ferry/backends/sim/sim_shared_event.h"
#include "ferry/device/backend.h"

namespace ferry::sim::detail {

class SimStream;

// Settings every worker reads while it runs; changed by sim::configure.
struct SimKnobs {
  std::atomic<bool> chaos{false};
  std::atomic<uint64_t> chaos_seed{0};
  std::atomic<int64_t> chaos_max_delay_ns{0};
  std::atomic<uint64_t> chaos_generation{0};  // bumped on every configure: reseed
  std::atomic<bool> hide_device_memory{false};
};

struct SimEvent {
  explicit SimEvent(int device, bool timing) : device(device), timing(timing) {}
  const int device;
  const bool timing;
  std::mutex mutex;
  std::shared_ptr<SimStream> stream;  // of the last record; null: never recorded
  uint64_t seq = 0;                   // complete once stream->completed() >= seq
  uint64_t stamped_seq = 0;           // the record that `time` belongs to (timing events)
  std::chrono::steady_clock::time_point time;
  // Interprocess events keep their completion state here (stream and seq stay unused).
  std::shared_ptr<SharedEventState> shared;
};

struct SimOp {
  // kSignal publishes an interprocess event's generation; kWaitShared waits for one.
  enum class Kind : uint8_t { kCopy, kFill, kMark, kWait, kHost, kSignal, kWaitShared };
  Kind kind = Kind::kCopy;
  uint8_t device_sides = 0;  // kDstIsDevice | kSrcIsDevice, for ThreadSanitizer builds
  int value = 0;
  uint64_t seq = 0;
  void* dst = nullptr;
  const void* src = nullptr;
  size_t nbytes = 0;                    // a batch: the total of its ranges
  std::vector<CopyRange> batch;         // kCopy of a batch (memcpy_batch_async): these ranges, host
                                        // addresses of both sides, instead of dst/src
  std::chrono::nanoseconds cost{0};     // simulated transfer time (latency + bytes/bandwidth)
  std::shared_ptr<SimStream> wait_for;  // kWait: the stream and position to wait for
  uint64_t wait_seq = 0;
  std::shared_ptr<SimEvent> event;                 // kMark: the timing event to stamp
  std::function<void()> host;                      // kHost
  std::shared_ptr<SharedEventState> shared_event;  // kSignal, kWaitShared (generation: wait_seq)
};

class SimStream : public std::enable_shared_from_this<SimStream> {
 public:
  // How long a waiter (host or worker) polls before it sleeps.
  static constexpr std::chrono::microseconds kSpin{50};

  SimStream(int device, int serial, const SimKnobs& knobs)
      : device_(device), serial_(serial), knobs_(knobs) {}
  SimStream(const SimStream&) = delete;
  SimStream& operator=(const SimStream&) = delete;
  ~SimStream();

  int device() const { return device_; }
  int serial() const { return serial_; }

  // Appends `op` and returns its position (1, 2, ...). Starts the worker on first use. Raises
  // DeviceError naming `call` (the backend call that queues it) once the stream is destroyed.
  uint64_t enqueue(SimOp&& op, const char* call);
  // The position of the last operation enqueued so far.
  uint64_t tail() const;
  bool done(uint64_t seq) const { return completed_.load(std::memory_order_acquire) >= seq; }
  bool query() const { return done(tail()); }
  // Blocks until operation `seq` has finished.
  void wait(uint64_t seq) const;
  // Waits for everything enqueued so far; raises DeviceError naming `call` if a host function
  // failed since the last synchronize (the error is reported once).
  void synchronize(const char* call);
  // Waits without reporting errors (for free and configure).
  void drain() const { wait(tail()); }
  // Operations enqueued and not finished yet.
  uint64_t pending() const;
  // Drains the queue and stops the worker. Concurrent calls all return once the worker is gone.
  void shutdown();

  // True on a sim worker thread (where blocking on streams could deadlock).
  static bool on_worker_thread();

 private:
  void run();
  void execute(SimOp& op);
  void chaos_delay();

  const int device_;
  const int serial_;
  const SimKnobs& knobs_;

  mutable std::mutex mutex_;
  std::condition_variable work_cv_;          // the worker waits for work here
  mutable std::condition_variable done_cv_;  // waiters wait for completions here
  std::deque<SimOp> queue_;
  uint64_t enqueued_ = 0;
  // Changes on every enqueue and on shutdown: what an idle worker spins on, without the lock.
  std::atomic<uint64_t> enqueued_hint_{0};
  std::atomic<uint64_t> completed_{0};
  mutable int done_waiters_ = 0;
  bool worker_idle_ = false;
  bool stop_ = false;
  std::string error_;
  // Written under mutex_ by the first enqueue only; once stop_ is set, read and joined under
  // join_mutex_ so that concurrent shutdowns join it once.
  std::thread worker_;
  std::mutex join_mutex_;

  // Worker-only state.
  std::mt19937_64 rng_;
  uint64_t rng_generation_ = ~uint64_t{0};
};

}  // namespace ferry::sim::detail
