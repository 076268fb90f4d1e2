// run_cold_start and time_cold_start (see cold_start.h).
#include "bench/cold_start.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

#include "bench/timing.h"
#include "ferry/autograd/grad_mode.h"
#include "ferry/core/error.h"
#include "ferry/device/stream.h"
#include "ferry/switch/switch_layers.h"
#include "ferry/switch/zoo_model.h"

extern char** environ;

namespace ferry::bench {

int run_cold_start(const ColdStartOptions& o) {
  const double t0 = now_ms();
  const Device device(o.device);
  switch_::ZooInputShape shape;
  shape.batch = o.batch;
  switch_::ZooModel model = switch_::make_zoo_model(o.arch, 0, shape);
  const double built = now_ms();
  model.module->load(o.weights, device);
  const double loaded = now_ms();
  {
    NoGradGuard no_grad;
    (void)switch_::run_layers(model.layers, model.example_input(device));
  }
  current_stream(device).synchronize();
  const double ran = now_ms();
  std::printf("{\"build_ms\": %.3f, \"load_ms\": %.3f, \"run_ms\": %.3f}\n", built - t0,
              loaded - built, ran - loaded);
  return 0;
}

double time_cold_start(const ColdStartOptions& o, const sim::SimConfig& sim_config) {
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  FERRY_CHECK(n > 0,
              "bench-switch: cannot find this executable (/proc/self/exe): ", std::strerror(errno));
  exe[n] = '\0';
  const std::vector<std::string> args = {
      exe,       "switch-cold-start", "--arch", o.arch,    "--weights",
      o.weights, "--device",          o.device, "--batch", std::to_string(o.batch)};
  // The environment, with the benchmark's sim settings over any FERRY_SIM_* already there.
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [key, value] : sim_config.settings()) env[key] = value;
  std::vector<std::string> env_entries;
  for (const auto& [key, value] : env) env_entries.push_back(key + "=" + value);
  std::vector<char*> argv, envp;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : env_entries) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  const double t0 = now_ms();
  pid_t pid = 0;
  const int err = posix_spawn(&pid, exe, &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  FERRY_CHECK(err == 0, "bench-switch: cannot start ", exe,
              " switch-cold-start: ", std::strerror(err));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const double ms = now_ms() - t0;
  FERRY_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "bench-switch: expected the stop-and-start process for ", o.arch,
              " to exit with status 0, but it ",
              WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                                : "was killed by signal " + std::to_string(WTERMSIG(status)));
  return ms;
}

}  // namespace ferry::bench
