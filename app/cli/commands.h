#pragma once
// Each kvscope-cli subcommand lives in its own file and registers itself on the
// root CLI11 app. A subcommand's callback returns the process exit code through
// `exitCode`: 0 on success, 1 for a user-caused error (printed as one line).

#include <CLI/CLI.hpp>

namespace kvscope::cli {

struct GlobalOptions {
  int device = -1;  // --device N; -1 means KVSCOPE_DEVICE or automatic choice
};

void registerDevices(CLI::App& app, const GlobalOptions& global, int& exitCode);
void registerInspect(CLI::App& app, const GlobalOptions& global, int& exitCode);
void registerBenchKernels(CLI::App& app, const GlobalOptions& global, int& exitCode);
void registerBenchAttention(CLI::App& app, const GlobalOptions& global, int& exitCode);
void registerBenchRestore(CLI::App& app, const GlobalOptions& global, int& exitCode);
void registerGenerate(CLI::App& app, const GlobalOptions& global, int& exitCode);
void registerChat(CLI::App& app, const GlobalOptions& global, int& exitCode);
void registerMakeModel(CLI::App& app, const GlobalOptions& global, int& exitCode);
void registerBench(CLI::App& app, const GlobalOptions& global, int& exitCode);
void registerConvert(CLI::App& app, const GlobalOptions& global, int& exitCode);
void registerEval(CLI::App& app, const GlobalOptions& global, int& exitCode);
void registerProbe(CLI::App& app, const GlobalOptions& global, int& exitCode);
void registerIndexerHeads(CLI::App& app, const GlobalOptions& global, int& exitCode);
void registerServe(CLI::App& app, const GlobalOptions& global, int& exitCode);
void registerTemplate(CLI::App& app, const GlobalOptions& global, int& exitCode);
void registerDump(CLI::App& app, const GlobalOptions& global, int& exitCode);

}  // namespace kvscope::cli
