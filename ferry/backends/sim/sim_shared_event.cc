// Sim interprocess events: the shared page, recording, completion, polling waits and the
// recorder-liveness check behind "the recording process died".
#include "ferry/backends/sim/sim_shared_event.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>

#include "ferry/backends/sim/sim_access.h"  // FERRY_SIM_TSAN and its annotations
#include "ferry/core/error.h"

namespace ferry::sim::detail {
namespace {

constexpr char kSharedEventMagic[8] = {'F', 'E', 'R', 'R', 'Y', 'E', 'V', 'T'};
constexpr uint32_t kSharedEventVersion = 1;

size_t shared_event_page_size() {
  static const size_t size = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

// What /proc says about a process: whether it is running (not gone, not a zombie) and when it
// started (clock ticks since boot), which tells a reused pid apart.
struct ProcessState {
  bool running = false;
  uint64_t start_time = 0;
};

ProcessState process_state(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!in || !std::getline(in, text)) return {};
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream fields(text.substr(close + 1));
  std::string state;
  fields >> state;  // field 3
  std::string skip;
  for (int field = 4; field < 22; ++field) fields >> skip;
  uint64_t start = 0;
  fields >> start;  // field 22
  const bool running = !state.empty() && state[0] != 'Z' && state[0] != 'X';
  return {running, start};
}

uint64_t own_start_time() {
  static const uint64_t start = process_state(static_cast<int>(::getpid())).start_time;
  return start;
}

std::atomic<uint32_t> shared_event_serial{0};

// ThreadSanitizer relates a release to an acquire by address, and an event exported and imported
// in one process maps its page twice: one counter at two addresses, so TSan would not see what
// the counter orders. Both mappings annotate on one key per memory file (its inode) instead.
const void* tsan_sync_key(int fd) {
#ifdef FERRY_SIM_TSAN
  struct stat st {};
  if (::fstat(fd, &st) != 0) return nullptr;
  static std::mutex mutex;
  static std::map<std::pair<dev_t, ino_t>, std::unique_ptr<char>> keys;  // never freed
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<char>& key = keys[{st.st_dev, st.st_ino}];
  if (!key) key = std::make_unique<char>();
  return key.get();
#else
  (void)fd;
  return nullptr;
#endif
}

}  // namespace

struct SharedEventState::Page {
  char magic[8];
  uint32_t version;
  int32_t device;
  int32_t creator_pid;
  uint32_t creator_serial;
  std::atomic<uint64_t> recorded;
  std::atomic<uint64_t> completed;
  // The process that made the last record, written before `recorded` is bumped.
  std::atomic<int64_t> recorder_pid;
  std::atomic<uint64_t> recorder_start;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<int64_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free to work across processes");

SharedEventState::SharedEventState(int device) : device_(device) {
  const std::string prefix = "sim:" + std::to_string(device) + ": event_create_interprocess: ";
  fd_.reset(::memfd_create("ferry-sim-event", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  FERRY_CHECK_AS(DeviceError, fd_.valid(), prefix, "memfd_create failed: ", std::strerror(errno));
  const size_t size = shared_event_page_size();
  FERRY_CHECK_AS(DeviceError, ::ftruncate(fd_.get(), static_cast<off_t>(size)) == 0, prefix,
                 "ftruncate failed: ", std::strerror(errno));
  FERRY_CHECK_AS(DeviceError,
                 ::fcntl(fd_.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0,
                 prefix, "sealing the memfd failed: ", std::strerror(errno));
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
  FERRY_CHECK_AS(DeviceError, p != MAP_FAILED, prefix, "mmap failed: ", std::strerror(errno));
  page_ = new (p) Page{};
  tsan_key_ = tsan_sync_key(fd_.get());
  std::memcpy(page_->magic, kSharedEventMagic, sizeof(kSharedEventMagic));
  page_->version = kSharedEventVersion;
  page_->device = device;
  page_->creator_pid = static_cast<int32_t>(::getpid());
  page_->creator_serial = shared_event_serial.fetch_add(1, std::memory_order_relaxed);
  name_ = "interprocess event " + std::to_string(page_->creator_pid) + "." +
          std::to_string(page_->creator_serial) + " of sim:" + std::to_string(device);
}

SharedEventState::SharedEventState(const IpcHandle& handle) : device_(handle.device.index()) {
  const std::string prefix = "sim:" + std::to_string(device_) + ": event_ipc_import: ";
  FERRY_CHECK_AS(
      DeviceError,
      handle.bytes.size() == sizeof(kSharedEventMagic) &&
          std::memcmp(handle.bytes.data(), kSharedEventMagic, sizeof(kSharedEventMagic)) == 0,
      prefix, "expected a sim event handle (8 bytes, FERRYEVT), but got ", handle.bytes.size(),
      " bytes of something else");
  FERRY_CHECK_AS(DeviceError, handle.fd.valid(), prefix,
                 "expected the handle to carry the event's file descriptor, but it has none");
  const size_t size = shared_event_page_size();
  struct stat st {};
  FERRY_CHECK_AS(DeviceError, ::fstat(handle.fd.get(), &st) == 0, prefix,
                 "fstat failed: ", std::strerror(errno));
  const int seals = ::fcntl(handle.fd.get(), F_GET_SEALS);
  FERRY_CHECK_AS(
      DeviceError,
      static_cast<uint64_t>(st.st_size) == size && seals >= 0 && (seals & F_SEAL_SHRINK) != 0,
      prefix, "expected a sealed memory file of ", size,
      " bytes (an exported sim event), but the descriptor refers to ", st.st_size, " bytes",
      seals < 0 ? " that cannot be sealed" : "");
  fd_ = handle.fd.duplicate();
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
  FERRY_CHECK_AS(DeviceError, p != MAP_FAILED, prefix, "mmap failed: ", std::strerror(errno));
  page_ = static_cast<Page*>(p);
  tsan_key_ = tsan_sync_key(fd_.get());
  const bool valid = std::memcmp(page_->magic, kSharedEventMagic, sizeof(kSharedEventMagic)) == 0 &&
                     page_->version == kSharedEventVersion && page_->device == device_;
  if (!valid) {
    ::munmap(p, size);
    page_ = nullptr;
    FERRY_FAIL_AS(DeviceError, prefix, "expected an event exported from sim:", device_,
                  " (FERRYEVT, version ", kSharedEventVersion,
                  "), but the memory file holds something else");
  }
  name_ = "interprocess event " + std::to_string(page_->creator_pid) + "." +
          std::to_string(page_->creator_serial) + " of sim:" + std::to_string(device_);
}

SharedEventState::~SharedEventState() {
  if (page_ != nullptr) ::munmap(page_, shared_event_page_size());
}

IpcHandle SharedEventState::export_handle() const {
  IpcHandle handle;
  handle.device = Device(DeviceType::Sim, static_cast<DeviceIndex>(device_));
  handle.size = 0;
  handle.bytes.assign(reinterpret_cast<const std::byte*>(kSharedEventMagic),
                      reinterpret_cast<const std::byte*>(kSharedEventMagic) + 8);
  handle.fd = fd_.duplicate();
  return handle;
}

uint64_t SharedEventState::begin_record() {
  page_->recorder_pid.store(::getpid(), std::memory_order_relaxed);
  page_->recorder_start.store(own_start_time(), std::memory_order_relaxed);
  return page_->recorded.fetch_add(1, std::memory_order_acq_rel) + 1;
}

void SharedEventState::complete(uint64_t generation) {
#ifdef FERRY_SIM_TSAN
  if (tsan_key_ != nullptr) AnnotateHappensBefore(__FILE__, __LINE__, tsan_key_);
#endif
  uint64_t seen = page_->completed.load(std::memory_order_relaxed);
  while (seen < generation &&
         !page_->completed.compare_exchange_weak(seen, generation, std::memory_order_release,
                                                 std::memory_order_relaxed)) {
  }
}

uint64_t SharedEventState::last_recorded() const {
  return page_->recorded.load(std::memory_order_acquire);
}

bool SharedEventState::done(uint64_t generation) const {
  const bool complete = page_->completed.load(std::memory_order_acquire) >= generation;
#ifdef FERRY_SIM_TSAN
  if (complete && tsan_key_ != nullptr) AnnotateHappensAfter(__FILE__, __LINE__, tsan_key_);
#endif
  return complete;
}

bool SharedEventState::recorder_dead() const {
  const auto pid = static_cast<int>(page_->recorder_pid.load(std::memory_order_relaxed));
  if (pid <= 0 || pid == static_cast<int>(::getpid())) return false;
  const ProcessState state = process_state(pid);
  return !state.running ||
         state.start_time != page_->recorder_start.load(std::memory_order_relaxed);
}

bool SharedEventState::query(uint64_t generation, const char* call) const {
  if (done(generation)) return true;
  if (!recorder_dead()) return false;
  // It may have completed just before the recorder exited.
  if (done(generation)) return true;
  FERRY_FAIL_AS(DeviceError, "sim:", device_, ": ", call, ": ", name_,
                ": expected its record (generation ", generation,
                ") to complete, but the recording process ",
                page_->recorder_pid.load(std::memory_order_relaxed),
                " exited before the work queued before the record was done");
}

void SharedEventState::wait(uint64_t generation, const char* call) const {
  using Clock = std::chrono::steady_clock;
  const auto spin_until = Clock::now() + std::chrono::microseconds(50);
  while (Clock::now() < spin_until) {
    if (done(generation)) return;
  }
  auto sleep = std::chrono::microseconds(10);
  while (!query(generation, call)) {
    std::this_thread::sleep_for(sleep);
    sleep = std::min<std::chrono::microseconds>(sleep * 2, std::chrono::milliseconds(1));
  }
}

}  // namespace ferry::sim::detail
