// The `ferry` command-line tool: `ferry --version` and the registered subcommands
// (ops, bench, explain, devices, ...). Errors from ferry are printed, not thrown out of main.
#include <cstdio>
#include <exception>
#include <memory>

#include "ferry/ferry.h"
#include "ferry/version.h"
#include "tools/command.h"

namespace ferry::tools {

std::vector<Command>& command_registry() {
  static std::vector<Command> commands;
  return commands;
}

}  // namespace ferry::tools

int main(int argc, char** argv) {
  CLI::App app{"ferry: moves tensors between layouts, dtypes, devices, streams and processes"};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", std::string("ferry ") + FERRY_VERSION);

  std::function<int()> run;
  for (auto& command : ferry::tools::command_registry()) {
    CLI::App* sub = app.add_subcommand(command.name, command.help);
    auto runner = std::make_shared<std::function<int()>>();
    *runner = command.setup(*sub);
    sub->callback([runner, &run] { run = *runner; });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!run) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  try {
    return run();
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "ferry: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry: unexpected error: %s\n", e.what());
    return 2;
  }
}
