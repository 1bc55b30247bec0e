#include "cli/model_options.h"

#include "model/model_tokenizer.h"
#include "runtime/backend_factory.h"

namespace kvscope::cli {

void addModelOptions(CLI::App* cmd, ModelOptions& o) {
  cmd->add_option("-m,--model", o.model, "GGUF file or Hugging Face folder")->required();
  cmd->add_option("-c,--ctx", o.context, "Context length in tokens (default: the model's)");
  cmd->add_option("--backend", o.backend, "Backend to run on")->check(CLI::IsMember({"cpu", "vulkan"}));
  cmd->add_option("--threads", o.threads, "CPU threads (default: all)");
  cmd->add_option("--temp", o.sampler.temperature, "Temperature; 0 = greedy")
      ->default_val(o.sampler.temperature);
  cmd->add_option("--top-k", o.sampler.topK, "Top-k; 0 = off")->default_val(o.sampler.topK);
  cmd->add_option("--top-p", o.sampler.topP, "Top-p; 1 = off")->default_val(o.sampler.topP);
  cmd->add_option("--min-p", o.sampler.minP, "Min-p; 0 = off")->default_val(o.sampler.minP);
  cmd->add_option("--repeat-penalty", o.sampler.repeatPenalty, "Repetition penalty; 1 = off")
      ->default_val(o.sampler.repeatPenalty);
  cmd->add_option("--repeat-last-n", o.sampler.repeatLastN,
                  "Tokens the repetition penalty looks back over")
      ->default_val(o.sampler.repeatLastN);
  cmd->add_option("--seed", o.seed, "Sampling seed (default: random, reported)")
      ->each([&o](const std::string&) { o.seedSet = true; });
}

Expected<std::unique_ptr<runtime::Session>> loadSession(const ModelOptions& o,
                                                        const GlobalOptions& global) {
  KVS_ASSIGN_OR_RETURN(auto file, model::ModelFile::open(o.model));
  std::shared_ptr<const model::ModelFile> model(std::move(file));
  KVS_ASSIGN_OR_RETURN(auto tokenizer, model::loadTokenizer(*model));
  KVS_ASSIGN_OR_RETURN(auto backend,
                       runtime::makeBackend(model, {o.backend, o.context, global.device, o.threads}));
  return std::make_unique<runtime::Session>(model, std::move(backend), std::move(tokenizer));
}

}  // namespace kvscope::cli
