#pragma once
// Loading a model into a Session: the one sequence the app and the CLI (its
// chat, serve and dump commands) run. It comes in two halves so that the app can keep the model
// it runs now until the new one is certain to load:
//
//   checkLoad    reads and validates the file and its tokenizer, checks the
//                backend choice against the model (checkChoice: the kind, the
//                KV policy, what the Vulkan kernels run) and that the weights
//                and a cache at the chosen context fit the device. Nothing is
//                allocated on the device; only a device that fails vetting or
//                runs out of memory can still fail startSession.
//   startSession vets the device when asked, uploads the weights, allocates
//                the cache and returns the Session, whose factory rebuilds
//                the same backend under other KV policies.
//
// The CLI runs one after the other; the app releases its current model
// between them, so two models never hold device memory at once.

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "core/error.h"
#include "model/model_file.h"
#include "runtime/backend_factory.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace kvscope::runtime {

// A load that passed every check that needs no device memory.
struct CheckedLoad {
  std::shared_ptr<const model::ModelFile> model;
  tokenizer::Tokenizer tokenizer;
  BackendChoice choice;
  std::string kind;  // what startSession builds, unless vetting moves it: "cpu" or "vulkan"
};

// What a load is doing, for a progress display.
enum class LoadStep {
  kReadingFile,       // opening and validating the GGUF / safetensors headers
  kLoadingTokenizer,  // vocabulary and chat template
  kBuildingBackend,   // vetting the device (first use), weights to it, the cache
};
using LoadProgress = std::function<void(LoadStep)>;

Expected<CheckedLoad> checkLoad(const std::filesystem::path& path, BackendChoice choice,
                                const LoadProgress& progress = {});

// `notice` receives what the user should know about the backend they got
// (makeBackend's notice: a device that failed vetting, a shorter context);
// empty when nothing.
Expected<std::unique_ptr<Session>> startSession(CheckedLoad load, std::string* notice,
                                                const LoadProgress& progress = {});

}  // namespace kvscope::runtime
