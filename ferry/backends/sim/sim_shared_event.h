// SharedEventState: the completion state of a sim event shared between processes. It lives in
// one page of a sealed memfd that every process holding the event maps MAP_SHARED, so a record
// made in one process is seen by waits, queries and synchronizes in all of them. A record takes
// the next generation number (`recorded`); the recording stream publishes it into `completed`
// once the work queued before the record is done. A wait for generation g ends when completed
// >= g, polling with a bounded backoff (a short spin, then sleeps doubling up to 1 ms).
// Guarantee when the recording process dies with a record pending: the wait does not hang; it
// raises DeviceError naming the event and the dead process (the recorder's pid and start time
// are kept beside the generation, so a reused pid is not taken for the recorder). The processes
// must share a pid namespace (a recorder in another one would look dead).
// Internal to the sim backend.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "ferry/device/ipc_handle.h"

namespace ferry::sim::detail {

class SharedEventState {
 public:
  // A new event of sim device `device` (its own memfd page).
  explicit SharedEventState(int device);
  // Maps an exported event; raises DeviceError for a handle that is not one.
  explicit SharedEventState(const IpcHandle& handle);
  SharedEventState(const SharedEventState&) = delete;
  SharedEventState& operator=(const SharedEventState&) = delete;
  ~SharedEventState();

  int device() const { return device_; }
  // "interprocess event 1234.5 of sim:0" (creator pid and serial): how errors name it.
  const std::string& name() const { return name_; }
  IpcHandle export_handle() const;

  // Starts a record by this process and returns its generation.
  uint64_t begin_record();
  // Marks generation `generation` (and every earlier one) complete.
  void complete(uint64_t generation);
  // The generation of the last record in any process (0: never recorded).
  uint64_t last_recorded() const;
  bool done(uint64_t generation) const;
  // done(generation); raises DeviceError naming `call` and the event when the generation is
  // pending and its recorder has exited.
  bool query(uint64_t generation, const char* call) const;
  // Blocks until `generation` completes; raises as query() does.
  void wait(uint64_t generation, const char* call) const;

 private:
  struct Page;
  // Whether the process that made the pending record is gone.
  bool recorder_dead() const;

  int device_ = 0;
  std::string name_;
  UniqueFd fd_;
  Page* page_ = nullptr;
  const void* tsan_key_ = nullptr;  // ThreadSanitizer builds: see tsan_sync_key
};

}  // namespace ferry::sim::detail
