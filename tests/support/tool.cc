// run_ferry_tool: popen on `<env> '<tool>' <args> 2>&1`, reading everything it prints.
#include "tests/support/tool.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>

namespace ferry::testing {

const char* ferry_tool() { return std::getenv("FERRY_TOOL"); }

ToolRun run_ferry_tool(const std::string& args, const std::string& env) {
  ToolRun run;
  const char* tool = ferry_tool();
  if (tool == nullptr) return run;
  const std::string command = env + " '" + tool + "' " + args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    run.out.append(buffer.data(), n);
  const int rc = ::pclose(pipe);
  run.status = rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return run;
}

}  // namespace ferry::testing
