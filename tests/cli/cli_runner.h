#pragma once
// Runs the built kvscope-cli with arguments and captures stdout, stderr and
// the exit code, for end-to-end tests of the command line.

#include <string>

namespace kvscope::test {

struct CliResult {
  int exitCode = -1;
  std::string out;
  std::string err;
};

CliResult runCli(const std::string& args, const std::string& env = "");

}  // namespace kvscope::test
