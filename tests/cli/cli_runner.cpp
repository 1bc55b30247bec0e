#include "cli_runner.h"

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kvscope::test {

CliResult runCli(const std::string& args, const std::string& env) {
  const auto dir = std::filesystem::temp_directory_path();
  const auto errPath = dir / ("kvscope-cli-err-" + std::to_string(::getpid()));
  const std::string cmd = env + " " KVSCOPE_CLI " " + args + " 2>" + errPath.string();
  CliResult r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  const int status = ::pclose(pipe);
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream errFile(errPath);
  std::stringstream ss;
  ss << errFile.rdbuf();
  r.err = ss.str();
  std::filesystem::remove(errPath);
  return r;
}

}  // namespace kvscope::test
