#include "runtime/session_load.h"

#include <utility>

#include "model/model_tokenizer.h"

namespace kvscope::runtime {
namespace {

void report(const LoadProgress& progress, LoadStep step) {
  if (progress) progress(step);
}

}  // namespace

Expected<CheckedLoad> checkLoad(const std::filesystem::path& path, BackendChoice choice,
                                const LoadProgress& progress) {
  report(progress, LoadStep::kReadingFile);
  KVS_ASSIGN_OR_RETURN(auto file, model::ModelFile::open(path));
  std::shared_ptr<const model::ModelFile> model(std::move(file));
  report(progress, LoadStep::kLoadingTokenizer);
  KVS_ASSIGN_OR_RETURN(tokenizer::Tokenizer tokenizer, model::loadTokenizer(*model));
  KVS_ASSIGN_OR_RETURN(std::string kind, checkChoice(*model, choice));
  // A context the device cannot hold is refused here, with the longest that
  // would fit, before anything is allocated.
  if (kind == "vulkan") KVS_TRY(checkDeviceFits(*model, choice));
  return CheckedLoad{std::move(model), std::move(tokenizer), std::move(choice), std::move(kind)};
}

Expected<std::unique_ptr<Session>> startSession(CheckedLoad load, std::string* notice,
                                                const LoadProgress& progress) {
  report(progress, LoadStep::kBuildingBackend);
  KVS_ASSIGN_OR_RETURN(auto backend, makeBackend(load.model, load.choice, notice));
  // The factory rebuilds the backend the session got: "cpu" when a Vulkan
  // device failed vetting, at the context makeBackend chose.
  load.choice.kind = std::string(backend->name());
  load.choice.contextLimit = backend->contextLimit();
  BackendFactory factory = makeBackendFactory(load.model, load.choice);
  return std::make_unique<Session>(std::move(load.model), std::move(backend),
                                   std::move(load.tokenizer), std::move(factory),
                                   std::move(load.choice.kvPolicy));
}

}  // namespace kvscope::runtime
