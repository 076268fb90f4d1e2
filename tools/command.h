// Subcommands of the `ferry` tool. Each tools/<name>_command.cc registers itself with
// FERRY_REGISTER_COMMAND; main() builds the CLI11 app from the registry, so adding a command
// touches no other file.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace ferry::tools {

struct Command {
  std::string name;
  std::string help;
  // Adds the subcommand's options to `sub` and returns the function that runs it; the
  // function's return value is the process exit code.
  std::function<std::function<int()>(CLI::App& sub)> setup;
};

std::vector<Command>& command_registry();

struct CommandRegistrar {
  explicit CommandRegistrar(Command command) { command_registry().push_back(std::move(command)); }
};

}  // namespace ferry::tools

#define FERRY_TOOL_CONCAT_INNER(a, b) a##b
#define FERRY_TOOL_CONCAT(a, b) FERRY_TOOL_CONCAT_INNER(a, b)
// __COUNTER__, not __LINE__: a unity build compiles several command files as one translation unit.
#define FERRY_REGISTER_COMMAND(...)                          \
  static ::ferry::tools::CommandRegistrar FERRY_TOOL_CONCAT( \
      ferry_command_, __COUNTER__)(::ferry::tools::Command{__VA_ARGS__})
