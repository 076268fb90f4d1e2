// `ferry switch-worker`: a `ferry serve` worker process (ferry/switch/serve_worker.h). The
// controller starts it with its end of a socketpair as a descriptor; it is not for users.
#include <sys/types.h>

#include <memory>

#include "ferry/switch/serve_worker.h"
#include "tools/command.h"

namespace ferry::tools {
namespace {

struct SwitchWorkerOptions {
  int channel_fd = -1;
  int64_t parent = 0;
};

FERRY_REGISTER_COMMAND(
    "switch-worker",
    "Internal: a ferry serve worker process, started by the controller (not for users)",
    [](CLI::App& sub) -> std::function<int()> {
      auto o = std::make_shared<SwitchWorkerOptions>();
      sub.add_option("--channel-fd", o->channel_fd, "The controller's socket descriptor")
          ->required();
      sub.add_option("--parent", o->parent, "The controller's pid")->required();
      return
          [o] { return switch_::run_serve_worker(o->channel_fd, static_cast<pid_t>(o->parent)); };
    });

}  // namespace
}  // namespace ferry::tools
