#pragma once
// Session: one conversation with one model. It owns the backend (and so the
// KV cache), the tokenizer and the token history, and turns prompts into
// streamed text:
//   - generate(tokens): reuses the longest prefix of `tokens` already in the
//     cache (multi-turn chat, edits and regenerate cost only the new suffix),
//     trims the rest, prefills the new tokens in chunks with progress, then
//     decodes until end of generation, maxTokens, a stop request or a full
//     context. A full context is an explicit outcome (StopReason::kContextFull),
//     never silent truncation; a prompt longer than the context is an error.
//   - setKvPolicy(policy): re-encodes the cache under another KV policy into
//     a backend built for it (the BackendFactory): the stored rows where they
//     are f16 or stored alike (runtime/kv_reencode.h), else by running the
//     token history again, with progress; the conversation and history stay.
//   - an auto policy (kv/auto_policy.h) caches f16 until the first prompt
//     has run (its first kv::kAutoCalibrationTokens tokens; if it is shorter
//     than kv::kAutoMinTokens, until the conversation reaches that), measures
//     those rows, chooses each layer's schemes, and re-encodes the history
//     under that choice (runtime/kv_auto.h) before the rest runs: one extra
//     prefill of the history at that point.
//   - with indexer_dense_heads=auto (kv/indexer.h) every layer reads every
//     row until a prompt leaves runtime::autoHeadsMinTokens cached; then the
//     last kAutoHeadSteps tokens run again as decode steps with every head
//     selecting (runtime/indexer_heads.h), the heads that captured under
//     kAutoHeadCut of the attention mass stay dense for the rest of the
//     session (and its siblings), and those rows run once more as the
//     prompt ran them.
//   - requestStop() may be called from any thread; it is checked every step.
// Not thread-safe otherwise: the engine worker owns the session.

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "kv/auto_policy.h"
#include "model/model_file.h"
#include "runtime/backend_factory.h"
#include "runtime/observer.h"
#include "runtime/sampler.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace kvscope::runtime {

enum class StopReason { kEndOfGeneration, kMaxTokens, kStopRequested, kContextFull };
const char* stopReasonName(StopReason reason);

// What a reply does when it reaches the end of the context. Off, it stops
// there (StopReason::kContextFull). On, it shifts the context and goes on: the
// first `keep` cached tokens stay (BOS, the system prompt), the older half of
// the tokens after them are dropped, and the newer half is run again at its
// new positions (a prefill, since rotated and quantized K rows cannot be moved
// in place), so the reply continues with the newest half of the context as
// its memory. Each shift is counted in StepStats.
struct ContextShift {
  bool enabled = false;
  uint32_t keep = 0;  // capped at a quarter of the context, so a shift frees room
};

struct GenerateOptions {
  uint32_t maxTokens = 256;
  SamplerConfig sampler;
  uint32_t prefillChunk = 256;  // tokens per prefill batch (progress granularity)
  ContextShift shift;
  // Decode control tokens as their text: Harmony's channel markers, which the
  // server's reasoning split reads (tokenizer/reasoning.h).
  bool renderSpecial = false;
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids, the end-of-generation token excluded
  std::string text;
  StopReason stop = StopReason::kMaxTokens;
  StepStats stats;
  uint64_t seed = 0;  // the sampler's seed, to reproduce the run
};

class Session {
 public:
  // `factory` (optional; makeBackendFactory) lets setKvPolicy() build backends
  // under other policies; `kvPolicy` is the policy `backend` was built with.
  Session(std::shared_ptr<const model::ModelFile> model, std::unique_ptr<backend::Backend> backend,
          tokenizer::Tokenizer tokenizer, BackendFactory factory = {}, kv::KvPolicy kvPolicy = {});

  // A new conversation beside this one: the same model and tokenizer, chat
  // template and settings, attention options and KV policy (an auto policy
  // measures anew), on a backend the factory builds, with an empty cache.
  // The local server's slots are siblings of the chat's session. On a GPU a
  // sibling shares the device and the weights (backend/vulkan_model.h) and
  // adds its own cache. kUnsupported without a factory.
  Expected<std::unique_ptr<Session>> sibling() const;

  const tokenizer::Tokenizer& tokenizer() const { return *m_tokenizer; }
  const backend::Backend& backend() const { return *m_backend; }
  const model::ModelConfig& config() const { return m_backend->config(); }
  // Every token in the cache: prompts and generated tokens, in order.
  const std::vector<int32_t>& history() const { return m_history; }

  // Tokenizes plain text for completion (BOS as the vocabulary asks).
  std::vector<int32_t> tokenizeCompletion(std::string_view text) const;

  // How chats render: the model's Jinja template unless the user chose the
  // built-in format or plain completion (after the template failed), and
  // enable_thinking for templates that read it.
  struct ChatSettings {
    tokenizer::ChatRenderer renderer = tokenizer::ChatRenderer::kTemplate;
    std::optional<bool> enableThinking;
  };
  void setChatSettings(ChatSettings settings) { m_chatSettings = settings; }
  const ChatSettings& chatSettings() const { return m_chatSettings; }
  const tokenizer::ChatTemplate& chatTemplate() const { return m_chatTemplate; }
  // Renders with `source` instead of the model's templates (a user's .jinja file).
  void setChatTemplateSource(std::string source);
  // Renders a conversation (tools: a JSON array for templates that take tools;
  // empty for none; with tools, the model's "tool_use" template when it has
  // one). A template that fails is an error naming the model and the line; the
  // prompt's warning (no template) is for the UI.
  Expected<tokenizer::ChatPrompt> renderChat(std::span<const tokenizer::ChatMessage> messages,
                                             bool addGenerationPrompt = true,
                                             std::string toolsJson = {}) const;
  std::vector<int32_t> tokenizeChat(const tokenizer::ChatPrompt& prompt) const;

  Expected<GenerationResult> generate(std::span<const int32_t> prompt,
                                      const GenerateOptions& options, Observer* observer = nullptr);
  void requestStop() { m_stop.store(true); }
  // Drops cached tokens past n (edit / regenerate).
  Status trim(uint32_t n);
  // Clears the cache, prefills `tokens` in one forward() and returns the op
  // output called `name` as the model description computed it
  // (model/forward_ops.h: "blk.3.ffn_inp"; kvscope-cli dump). With the name
  // backend::kListTensorNames, the dump holds only the names of every op
  // output; a name no op has is kInvalidArgument, listing them.
  Expected<backend::TensorDump> dumpTensor(std::span<const int32_t> tokens,
                                           const std::string& name);

  // The KV policy the cache is encoded with; for an auto policy the policy as
  // given (auto:5.5), whose choice autoPlan() holds once made.
  const kv::KvPolicy& kvPolicy() const { return m_kvPolicy; }
  // An auto policy's choice, once it has measured; null otherwise.
  const kv::AutoPlan* autoPlan() const { return m_autoPlan ? &*m_autoPlan : nullptr; }
  // Re-encodes the cache under `policy` into a backend built for it, which
  // then replaces the current one: from f16 rows (or streams stored alike)
  // the stored rows are re-encoded without a forward pass
  // (runtime/kv_reencode.h; one Observer::onProgress); otherwise the whole
  // token history runs again (prefill in chunks of `chunk` tokens). The history is
  // unchanged, so the next generate() reuses all of it. A policy that does not
  // fit the model fails before any work; a failure or a stop
  // request during the re-encode keeps the current backend and cache as they
  // were. The old and new backend coexist during the switch (twice the
  // weights' memory on a device).
  // A policy that differs only in its attention options (indexer, sparse_v)
  // applies at once, without re-encoding.
  Status setKvPolicy(const kv::KvPolicy& policy, Observer* observer = nullptr, uint32_t chunk = 256);
  // The indexer's diagnostic mode (dense scores too, for the captured mass);
  // kept across policy switches.
  Status setIndexerDiagnostic(bool on);

  // Saves the KV cache as it is, with the token history, the policy and an
  // auto policy's state, to `path` (runtime/kv_file.h; written atomically).
  Status saveCache(const std::filesystem::path& path) const;
  // Replaces the cache and history with a saved cache's, without prefill.
  // The file must come from the same model (fingerprint and shapes) and a
  // policy that stores the same rows as this session's; its attention
  // options (indexer) are this session's. Anything else (another model or
  // policy: kInvalidArgument; a damaged or truncated file: kBadFile; a
  // context too short) is an error that leaves the session as it was. The
  // rows go into the session's own backend when it stores them the same way
  // (its cache emptied only after the whole file checked out; only a failure
  // past that point, such as running out of memory, leaves it empty); an
  // auto policy that had chosen, or a two-phase cache saved in the other
  // phase, gets a new backend (the factory), swapped in on success.
  Status restoreCache(const std::filesystem::path& path, Observer* observer = nullptr);

 private:
  Session(std::shared_ptr<const model::ModelFile> model, std::unique_ptr<backend::Backend> backend,
          std::shared_ptr<const tokenizer::Tokenizer> tokenizer, BackendFactory factory,
          kv::KvPolicy kvPolicy);
  Status prefill(std::span<const int32_t> prompt, const GenerateOptions& options,
                 Observer* observer, backend::Logits& logits, StepStats& stats);
  // The backend's forward() over `tokens` (part of a prompt, or a decode
  // step), keeping the history in step with the cache when a failure costs rows.
  Status run(std::span<const int32_t> tokens, backend::Logits& logits, bool prompt);
  // Drops the older half of the history after the first `keep` tokens and
  // runs the newer half again behind them (ContextShift); kCancelled on a
  // stop request, with the cache and history holding what was re-run.
  Status shiftContext(uint32_t keep, uint32_t chunk, StepStats& stats);
  // onKv, and onIndexer while the indexer is on.
  void report(Observer* observer) const;
  // A backend built under `policy` with `tokens` run through it (chunks of
  // `chunk`, Observer::onProgress); `logits` are the last chunk's.
  Expected<std::unique_ptr<backend::Backend>> rebuild(const kv::KvPolicy& policy,
                                                      std::span<const int32_t> tokens,
                                                      Observer* observer, uint32_t chunk,
                                                      backend::Logits& logits);
  // A backend built under `policy` holding the whole history: the stored
  // rows re-encoded where runtime::canReencode allows (no forward pass;
  // `logits` stay the current backend's), else the history run again
  // (rebuild; `logits` are its last chunk's).
  Expected<std::unique_ptr<backend::Backend>> convert(const kv::KvPolicy& policy,
                                                      Observer* observer, uint32_t chunk,
                                                      backend::Logits& logits);
  // An empty backend under `policy`, with its attention options and the
  // session's diagnostic mode.
  Expected<std::unique_ptr<backend::Backend>> build(const kv::KvPolicy& policy);
  // Runs `tokens` through `next` in chunks (a stop request: kCancelled).
  Status replay(backend::Backend& next, std::span<const int32_t> tokens, Observer* observer,
                uint32_t chunk, backend::Logits& logits);
  // Whether the policy is auto and has not measured yet.
  bool autoPending() const;
  // The policy's attention options as the backend takes them: the session's
  // diagnostic mode, and for indexer_dense_heads=auto the measured heads.
  kv::IndexerOptions attentionFor(const kv::KvPolicy& policy) const;
  // indexer_dense_heads=auto: whether the heads are still to be measured,
  // and the measurement (the cache then holds the history as before, and
  // `logits` its last token's). A failure leaves every head selecting and
  // the indexer snapshot saying why.
  bool denseHeadsPending() const;
  Status settleDenseHeads(uint32_t chunk, backend::Logits& logits);
  // Sets m_kvPolicy; an auto policy measures anew.
  void setPolicy(kv::KvPolicy policy);
  // Measures the f16 rows cached so far, chooses, and re-encodes the history.
  // A failure other than a stop is final for this policy (m_autoFailure; the
  // cache stays f16 and the KV snapshot says why).
  Status settleAuto(Observer* observer, uint32_t chunk, backend::Logits& logits);

  // model::modelFingerprint of m_model, computed at the first save or restore.
  uint64_t modelFingerprint() const;

  std::shared_ptr<const model::ModelFile> m_model;
  mutable std::optional<uint64_t> m_fingerprint;
  std::unique_ptr<backend::Backend> m_backend;
  BackendFactory m_factory;
  kv::KvPolicy m_kvPolicy;
  std::string m_autoFailure;  // why auto could not re-encode (then it stays f16)
  std::optional<kv::AutoPlan> m_autoPlan;
  // indexer_dense_heads=auto: the measured heads, once measured (or tried),
  // and what the indexer snapshot says about them.
  std::optional<std::vector<kv::KvHeadRef>> m_denseHeads;
  std::string m_denseHeadsNote;
  std::shared_ptr<const tokenizer::Tokenizer> m_tokenizer;  // shared with siblings
  tokenizer::ChatTemplate m_chatTemplate;
  std::optional<tokenizer::ChatTemplate> m_toolTemplate;  // the model's "tool_use" variant
  ChatSettings m_chatSettings;
  std::vector<int32_t> m_history;
  std::atomic<bool> m_stop{false};
};

}  // namespace kvscope::runtime
