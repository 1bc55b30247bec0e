// kvscope-cli: headless entry point. Wiring only; each subcommand is in its own file.
#include <cstdio>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"kvscope-cli: run local LLMs with a compressed KV cache, headless", "kvscope-cli"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kvscope 0.1.0");

  kvscope::cli::GlobalOptions global;
  app.add_option("--device", global.device, "Vulkan device index (see `devices`); also KVSCOPE_DEVICE");
  // Options of the root (--device) may also follow the subcommand.
  app.fallthrough();

  int exitCode = 0;
  kvscope::cli::registerDevices(app, global, exitCode);
  kvscope::cli::registerInspect(app, global, exitCode);
  kvscope::cli::registerBenchKernels(app, global, exitCode);
  kvscope::cli::registerBenchAttention(app, global, exitCode);
  kvscope::cli::registerBenchRestore(app, global, exitCode);
  kvscope::cli::registerGenerate(app, global, exitCode);
  kvscope::cli::registerChat(app, global, exitCode);
  kvscope::cli::registerMakeModel(app, global, exitCode);
  kvscope::cli::registerBench(app, global, exitCode);
  kvscope::cli::registerConvert(app, global, exitCode);
  kvscope::cli::registerEval(app, global, exitCode);
  kvscope::cli::registerProbe(app, global, exitCode);
  kvscope::cli::registerIndexerHeads(app, global, exitCode);
  kvscope::cli::registerServe(app, global, exitCode);
  kvscope::cli::registerTemplate(app, global, exitCode);
  kvscope::cli::registerDump(app, global, exitCode);

  if (argc < 2) {  // a bare invocation gets the full usage, not just "subcommand required"
    std::fputs(app.help().c_str(), stderr);
    return 1;
  }
  CLI11_PARSE(app, argc, argv);
  return exitCode;
}
