#include "cli/model_options.h"

#include <fmt/core.h>

#include "core/text_file.h"
#include "model/default_model.h"
#include "runtime/session_load.h"

namespace kvscope::cli {

Expected<std::vector<int32_t>> forcedTextTokens(const tokenizer::Tokenizer& tokenizer,
                                                const std::string& path) {
  KVS_ASSIGN_OR_RETURN(std::string text, readTextFile(path));
  if (text.ends_with('\n')) text.pop_back();
  if (text.empty())
    return makeError(ErrorCode::kInvalidArgument, "the text file '{}' is empty", path);
  return tokenizer.encode(text, {.addSpecial = true, .parseSpecial = false});
}

void addBackendOptions(CLI::App* cmd, std::string& backend, unsigned& threads) {
  cmd->add_option("--backend", backend, "Backend to run on")
      ->check(CLI::IsMember({"cpu", "vulkan"}))
      ->default_val(backend);
  cmd->add_option("--threads", threads, "CPU threads (default: all)");
}

void addModelOptions(CLI::App* cmd, ModelOptions& o) {
  cmd->add_option("-m,--model", o.model,
                  "GGUF file or Hugging Face folder (default: the bundled demo model)");
  cmd->add_option("-c,--ctx", o.context, "Context length in tokens (default: the model's)");
  cmd->add_option("--backend", o.backend, "Backend to run on")
      ->check(CLI::IsMember({"cpu", "vulkan"}));
  cmd->add_option("--threads", o.threads, "CPU threads (default: all)");
  auto* ctk = cmd->add_option("--ctk,--cache-type-k", o.cacheTypeK,
                              "KV cache scheme of K in every layer (f16, q8_0, turbo4, ...)");
  auto* ctv =
      cmd->add_option("--ctv,--cache-type-v", o.cacheTypeV, "KV cache scheme of V in every layer");
  cmd->add_option("--kv-policy", o.kvPolicy,
                  "KV cache policy, e.g. k=q8_0,v=turbo3,boundary=2,k@5=f16,two_phase,seed=7")
      ->excludes(ctk)
      ->excludes(ctv);
  addIndexerOption(cmd, o.indexer);
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

Expected<kv::KvPolicy> kvPolicyOf(const ModelOptions& o) {
  if (!o.kvPolicy.empty()) return kv::KvPolicy::parse(withIndexer(o.kvPolicy, o.indexer));
  std::string text;
  if (!o.cacheTypeK.empty()) text = "k=" + o.cacheTypeK;
  if (!o.cacheTypeV.empty()) text += (text.empty() ? "v=" : ",v=") + o.cacheTypeV;
  return kv::KvPolicy::parse(withIndexer(text, o.indexer));
}

Expected<kv::KvPolicy> sessionlessPolicy(const std::string& text) {
  KVS_ASSIGN_OR_RETURN(kv::KvPolicy policy, kv::KvPolicy::parse(text));
  if (policy.attention.autoDenseHeads) {
    return makeError(ErrorCode::kInvalidArgument,
                     "indexer_dense_heads=auto is measured on a conversation's prompt (chat, "
                     "generate, serve, probe, eval, the app); here name the heads: `kvscope-cli "
                     "indexer-heads` measures them on a text and prints the item");
  }
  return policy;
}

void addIndexerOption(CLI::App* cmd, std::string& indexer) {
  cmd->add_option("--indexer", indexer,
                  "Sparse decode attention: the top TOP_K cached rows by the indexer's score, "
                  "plus the last WINDOW and first SINKS rows (TOP_K[:WINDOW[:SINKS]], e.g. 512 "
                  "or 128:64:4)");
}

std::string withIndexer(std::string policy, const std::string& indexer) {
  if (indexer.empty()) return policy;
  return policy + (policy.empty() ? "" : ",") + "indexer=" + indexer;
}

void addContextOverflowOption(CLI::App* cmd, std::string& overflow) {
  cmd->add_option("--context-overflow", overflow,
                  "When the prompt does not fit the context: refuse it (stop); drop the oldest "
                  "turns after the first (truncate-middle) or the oldest turns (rolling) — for a "
                  "plain prompt, its middle or its start — keeping room for the reply")
      ->check(CLI::IsMember({"stop", "truncate-middle", "rolling"}))
      ->default_val(overflow);
}

void addChatTemplateOptions(CLI::App* cmd, ChatTemplateOptions& o) {
  cmd->add_option("--chat-template", o.templateFile,
                  "Render chats with this Jinja template file instead of the model's");
  cmd->add_option("--chat-renderer", o.renderer,
                  "What renders chats: the model's Jinja template, kvscope's built-in format "
                  "for its family, or plain completion")
      ->check(CLI::IsMember({"template", "builtin", "plain"}))
      ->default_val(o.renderer);
  cmd->add_option("--think", o.think,
                  "enable_thinking for templates that read it (Qwen3, …); default: the "
                  "template's own")
      ->check(CLI::IsMember({"on", "off"}));
}

Status applyChatTemplateOptions(const ChatTemplateOptions& o, runtime::Session& session) {
  if (!o.templateFile.empty()) {
    KVS_ASSIGN_OR_RETURN(std::string source, readTextFile(o.templateFile));
    session.setChatTemplateSource(std::move(source));
  }
  runtime::Session::ChatSettings settings;
  settings.renderer =
      tokenizer::parseChatRenderer(o.renderer).value_or(tokenizer::ChatRenderer::kTemplate);
  if (!o.think.empty()) settings.enableThinking = o.think == "on";
  session.setChatSettings(settings);
  if (const auto& parseError = session.chatTemplate().parseError();
      parseError && settings.renderer == tokenizer::ChatRenderer::kTemplate) {
    fmt::print(stderr, "warning: {} (--chat-renderer builtin or plain renders without it)\n",
               parseError->message);
  }
  if (settings.enableThinking && !session.chatTemplate().readsThinking()) {
    fmt::print(stderr,
               "warning: this model's chat template does not read enable_thinking; --think has no "
               "effect\n");
  }
  return okStatus();
}

Expected<std::unique_ptr<model::ModelFile>> openModelOrDemo(const std::string& path) {
  if (!path.empty()) return model::ModelFile::open(path);
  KVS_ASSIGN_OR_RETURN(const std::filesystem::path demo, model::findDefaultModel());
  return model::ModelFile::open(demo);
}

void addModelPathOption(CLI::App* cmd, std::string& path) {
  cmd->add_option("-m,--model", path,
                  "GGUF file or Hugging Face folder (default: kvscope's 0.9M-parameter demo model)");
}

void warnPastTrainedContext(uint32_t context, const model::ModelFile& model) {
  const uint32_t trained = model.config().contextLength;
  if (context > trained) {
    fmt::print(stderr,
               "warning: a context of {} tokens is past the {} tokens {} was trained for; "
               "replies that reach past {} may lose coherence\n",
               context, trained, model.path().filename().string(), trained);
  }
}

Expected<std::unique_ptr<runtime::Session>> loadSession(const ModelOptions& o,
                                                        const GlobalOptions& global) {
  std::filesystem::path path = o.model;
  if (path.empty()) {
    KVS_ASSIGN_OR_RETURN(path, model::findDefaultModel());
  }
  KVS_ASSIGN_OR_RETURN(kv::KvPolicy policy, kvPolicyOf(o));
  runtime::BackendChoice choice{.kind = o.backend,
                                .contextLimit = o.context,
                                .device = global.device,
                                .threads = o.threads,
                                .kvPolicy = std::move(policy)};
  KVS_ASSIGN_OR_RETURN(runtime::CheckedLoad load, runtime::checkLoad(path, std::move(choice)));
  warnPastTrainedContext(o.context, *load.model);
  std::string notice;
  KVS_ASSIGN_OR_RETURN(auto session, runtime::startSession(std::move(load), &notice));
  if (!notice.empty()) fmt::print(stderr, "warning: {}\n", notice);
  return session;
}

}  // namespace kvscope::cli
