#pragma once
// Options shared by the subcommands that run a model (generate, chat, bench):
// model path, context length, backend, KV cache policy, sampling; and
// loading a Session.

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "kv/kv_policy.h"
#include "model/model_file.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace kvscope::cli {

struct ModelOptions {
  std::string model;     // empty: the demo model (model/default_model.h)
  uint32_t context = 0;  // 0: the model's trained context
  std::string backend = "cpu";
  unsigned threads = 0;
  // KV cache: --ctk / --ctv (a scheme for every layer's K / V) or the full
  // --kv-policy text (kv/kv_policy.h); not both. None: f16.
  std::string cacheTypeK;
  std::string cacheTypeV;
  std::string kvPolicy;
  std::string indexer;  // --indexer TOP_K[:WINDOW[:SINKS]], added to the policy
  runtime::SamplerConfig sampler;
  uint64_t seed = 0;
  bool seedSet = false;
};

// Adds -m, -c, --backend, --threads, the KV cache and the sampling options to `cmd`.
void addModelOptions(CLI::App* cmd, ModelOptions& options);
// The KV cache policy the options ask for (none: f16); a text that does not
// parse is its error, naming the item.
Expected<kv::KvPolicy> kvPolicyOf(const ModelOptions& options);

// A KV cache policy for a command that runs a backend without a prompt to
// measure on (bench, indexer-heads): indexer_dense_heads=auto, which a
// session (or probe and eval) measures on its first long prompt, is refused
// with what to use.
Expected<kv::KvPolicy> sessionlessPolicy(const std::string& text);

// --indexer on `cmd`, and the policy text with it added as indexer=... (a
// policy that names its own indexer then fails to parse: given twice).
void addIndexerOption(CLI::App* cmd, std::string& indexer);
std::string withIndexer(std::string policy, const std::string& indexer);
// How chats render (the subcommands that chat: chat, serve).
struct ChatTemplateOptions {
  std::string templateFile;           // --chat-template: render with this .jinja instead
  std::string renderer = "template";  // --chat-renderer template|builtin|plain
  std::string think;                  // --think on|off; empty: the template's default
};
void addChatTemplateOptions(CLI::App* cmd, ChatTemplateOptions& options);
// Applies the options to the session; a template file that cannot be read is an error.
Status applyChatTemplateOptions(const ChatTemplateOptions& options, runtime::Session& session);

// --context-overflow stop|truncate-middle|rolling (runtime/context_overflow.h):
// what generate, chat and serve do with a prompt the context cannot hold.
void addContextOverflowOption(CLI::App* cmd, std::string& overflow);

// The model at `path`, or the demo model (model/default_model.h) when it is
// empty: what -m means in every subcommand.
Expected<std::unique_ptr<model::ModelFile>> openModelOrDemo(const std::string& path);
// The tokens of a text file to teacher-force through a model (eval,
// indexer-heads): completion tokenization, BOS as the vocabulary asks
// (Session::tokenizeCompletion); like llama.cpp's -f, the file's final
// newline ends the file, not the text. An empty text is an error.
Expected<std::vector<int32_t>> forcedTextTokens(const tokenizer::Tokenizer& tokenizer,
                                                const std::string& path);
// --backend cpu|vulkan and --threads, for the subcommands that measure on one
// backend (eval, probe, indexer-heads).
void addBackendOptions(CLI::App* cmd, std::string& backend, unsigned& threads);
// -m,--model for subcommands that take only a model path.
void addModelPathOption(CLI::App* cmd, std::string& path);
// A warning on stderr when `context` is past the model's trained context.
void warnPastTrainedContext(uint32_t context, const model::ModelFile& model);

// Opens the model and builds a Session; the error is user-readable.
Expected<std::unique_ptr<runtime::Session>> loadSession(const ModelOptions& options,
                                                        const GlobalOptions& global);

}  // namespace kvscope::cli
