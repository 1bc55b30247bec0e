#pragma once
// Options shared by the subcommands that run a model (generate, chat, bench):
// model path, context length, backend, sampling; and loading a Session.

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "runtime/session.h"

namespace kvscope::cli {

struct ModelOptions {
  std::string model;
  uint32_t context = 0;  // 0: the model's trained context
  std::string backend = "cpu";
  unsigned threads = 0;
  runtime::SamplerConfig sampler;
  uint64_t seed = 0;
  bool seedSet = false;
};

// Adds -m, -c, --backend, --threads and the sampling options to `cmd`.
void addModelOptions(CLI::App* cmd, ModelOptions& options);
// Opens the model and builds a Session; the error is user-readable.
Expected<std::unique_ptr<runtime::Session>> loadSession(const ModelOptions& options,
                                                        const GlobalOptions& global);

}  // namespace kvscope::cli
