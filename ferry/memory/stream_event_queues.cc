// The host waits of stream_event_queues.h: each use waited for through the memory layer's
// backend (its event, or its whole stream), every one tried even after a failure, so the caller
// can mark what completed before rethrowing the first error. Called with no lock held.
#include "ferry/memory/stream_event_queues.h"

namespace ferry::memory::detail {

std::exception_ptr wait_for_uses(std::vector<UseWait>& waits) {
  std::exception_ptr error;
  for (UseWait& w : waits) {
    try {
      Backend& backend = memory_backend(w.stream.device_type());
      if (w.event != nullptr) {
        backend.event_synchronize(w.stream.device_index(), w.event);
      } else {
        backend.stream_synchronize(w.stream.device_index(), w.stream.raw());
      }
      w.done = true;
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  return error;
}

}  // namespace ferry::memory::detail
