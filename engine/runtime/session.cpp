#include "runtime/session.h"

#include <algorithm>

#include "kv/kv_policy.h"
#include "tokenizer/detokenizer.h"

namespace kvscope::runtime {
namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

const char* stopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kEndOfGeneration:
      return "end_of_generation";
    case StopReason::kMaxTokens:
      return "max_tokens";
    case StopReason::kStopRequested:
      return "stopped";
    case StopReason::kContextFull:
      return "context_full";
  }
  return "unknown";
}

Session::Session(std::shared_ptr<const model::ModelFile> model,
                 std::unique_ptr<backend::Backend> backend, tokenizer::Tokenizer tokenizer,
                 BackendFactory factory, std::string kvPolicy)
    : m_model(std::move(model)),
      m_backend(std::move(backend)),
      m_factory(std::move(factory)),
      m_kvPolicy(std::move(kvPolicy)),
      m_tokenizer(std::move(tokenizer)),
      m_chatTemplate(m_tokenizer.vocab().chatTemplate) {}

std::vector<int32_t> Session::tokenizeCompletion(std::string_view text) const {
  return m_tokenizer.encode(text, {.addSpecial = true, .parseSpecial = false});
}

tokenizer::ChatPrompt Session::renderChat(std::span<const tokenizer::ChatMessage> messages) const {
  const auto& v = m_tokenizer.vocab();
  tokenizer::ChatOptions options;
  if (v.bos != tokenizer::kNoToken) options.bosToken = std::string(m_tokenizer.piece(v.bos, true));
  if (v.eos != tokenizer::kNoToken) options.eosToken = std::string(m_tokenizer.piece(v.eos, true));
  return m_chatTemplate.render(messages, options);
}

std::vector<int32_t> Session::tokenizeChat(const tokenizer::ChatPrompt& prompt) const {
  return tokenizer::encodeChatPrompt(m_tokenizer, prompt);
}

Status Session::trim(uint32_t n) {
  if (n > m_history.size()) return okStatus();
  KVS_TRY(m_backend->trim(n));
  m_history.resize(n);
  return okStatus();
}

Status Session::setKvPolicy(std::string_view policy, Observer* observer, uint32_t chunk) {
  m_stop.store(false);
  if (!m_factory) {
    return makeError(ErrorCode::kUnsupported,
                     "this session was opened without a backend factory; "
                     "its KV cache policy is fixed");
  }
  KVS_ASSIGN_OR_RETURN(const kv::KvPolicy parsed, kv::KvPolicy::parse(policy));
  const model::ModelConfig& c = m_backend->config();
  KVS_TRY(parsed.resolve({c.architecture, c.nLayer}));
  kv::IndexerOptions attention = parsed.attention;
  attention.diagnostic = m_backend->indexer().diagnostic;
  if (auto current = kv::KvPolicy::parse(m_kvPolicy); current.ok() && current->sameCache(parsed)) {
    // Only how attention reads the cache changes: no re-encode.
    KVS_TRY(m_backend->setIndexer(attention));
    m_kvPolicy = std::string(policy);
    report(observer);
    return okStatus();
  }
  KVS_ASSIGN_OR_RETURN(std::unique_ptr<backend::Backend> next, m_factory(policy));
  KVS_TRY(next->setIndexer(attention));
  // The history is the conversation as the model saw it; the new cache is
  // built the way a fresh session would build it, so both hold the same rows.
  const std::span<const int32_t> tokens(m_history);
  const size_t step = std::max<uint32_t>(chunk, 1);
  backend::Logits logits;
  for (size_t done = 0; done < tokens.size();) {
    if (m_stop.load())
      return makeError(ErrorCode::kCancelled, "stopped while re-encoding the cache");
    const size_t n = std::min(step, tokens.size() - done);
    KVS_TRY(next->forward({tokens.subspan(done, n)}, logits));
    done += n;
    if (observer)
      observer->onProgress(static_cast<uint32_t>(done), static_cast<uint32_t>(tokens.size()));
  }
  m_backend = std::move(next);
  m_kvPolicy = std::string(policy);
  report(observer);
  return okStatus();
}

Status Session::setIndexerDiagnostic(bool on) {
  kv::IndexerOptions options = m_backend->indexer();
  options.diagnostic = on;
  return m_backend->setIndexer(options);
}

void Session::report(Observer* observer) const {
  if (!observer) return;
  observer->onKv(snapshotKv(*m_backend));
  if (m_backend->indexer().enabled()) observer->onIndexer(snapshotIndexer(*m_backend));
}

// Reuses the cached prefix, trims the rest and runs the new prompt tokens in
// chunks; leaves the logits of the prompt's last token in `logits`.
Status Session::prefill(std::span<const int32_t> prompt, const GenerateOptions& options,
                        Observer* observer, backend::Logits& logits, StepStats& stats) {
  size_t common = 0;
  while (common < prompt.size() && common < m_history.size() && prompt[common] == m_history[common])
    ++common;
  // The last prompt token is always run again: its logits start the reply.
  if (common == prompt.size()) --common;
  KVS_TRY(trim(static_cast<uint32_t>(common)));
  stats.reusedTokens = static_cast<uint32_t>(common);
  const auto t0 = Clock::now();
  const size_t total = prompt.size() - common;
  const size_t chunk = std::max<uint32_t>(options.prefillChunk, 1);
  for (size_t done = 0; done < total;) {
    if (m_stop.load()) return makeError(ErrorCode::kCancelled, "stopped during prompt processing");
    const size_t n = std::min(chunk, total - done);
    KVS_TRY(m_backend->forward({prompt.subspan(common + done, n)}, logits));
    m_history.insert(m_history.end(), prompt.begin() + common + done,
                     prompt.begin() + common + done + n);
    done += n;
    if (observer) observer->onProgress(static_cast<uint32_t>(done), static_cast<uint32_t>(total));
  }
  stats.prefillMs = msSince(t0);
  return okStatus();
}

Expected<GenerationResult> Session::generate(std::span<const int32_t> prompt,
                                             const GenerateOptions& options, Observer* observer) {
  m_stop.store(false);
  if (prompt.empty()) return makeError(ErrorCode::kInvalidArgument, "the prompt is empty");
  const uint32_t limit = m_backend->contextLimit();
  if (prompt.size() > limit) {
    return makeError(ErrorCode::kInvalidArgument,
                     "the prompt has {} tokens but the context holds {}; "
                     "shorten it or raise the context length",
                     prompt.size(), limit);
  }
  KVS_ASSIGN_OR_RETURN(Sampler sampler, Sampler::create(options.sampler));
  GenerationResult result;
  result.seed = sampler.seed();
  StepStats& stats = result.stats;
  stats.promptTokens = static_cast<uint32_t>(prompt.size());
  stats.contextLimit = limit;
  for (int32_t t : prompt) sampler.accept(t);

  backend::Logits logits;
  KVS_TRY(prefill(prompt, options, observer, logits, stats));
  // The inspector follows the cache while decoding, at a rate a person can read.
  auto lastKv = Clock::now();
  report(observer);
  tokenizer::IncrementalDecoder decoder(m_tokenizer, {.stripLeadingSpace = false});
  result.stop = StopReason::kMaxTokens;
  while (result.tokens.size() < options.maxTokens) {
    if (m_stop.load()) {
      result.stop = StopReason::kStopRequested;
      break;
    }
    const int32_t token = sampler.sample(logits.last());
    sampler.accept(token);
    if (m_tokenizer.isEndOfGeneration(token)) {
      result.stop = StopReason::kEndOfGeneration;
      break;
    }
    result.tokens.push_back(token);
    const std::string piece = decoder.push(token);
    result.text += piece;
    if (observer) observer->onToken(piece, token);
    if (m_history.size() >= limit) {
      result.stop = StopReason::kContextFull;
      break;
    }
    if (result.tokens.size() == options.maxTokens) break;  // no need to run the last token
    const auto t0 = Clock::now();
    KVS_TRY(m_backend->forward({std::span(&token, 1)}, logits));
    m_history.push_back(token);
    stats.lastStepMs = msSince(t0);
    stats.decodeMs += stats.lastStepMs;
    ++stats.decodeSteps;
    stats.generatedTokens = static_cast<uint32_t>(result.tokens.size());
    stats.cachedTokens = m_backend->cachedTokens();
    stats.kernels = m_backend->kernelTimings();
    if (observer) {
      observer->onStep(stats);
      if (Clock::now() - lastKv >= kKvSnapshotInterval) {
        report(observer);
        lastKv = Clock::now();
      }
    }
  }
  const std::string tail = decoder.flush();
  result.text += tail;
  if (observer && !tail.empty()) observer->onToken(tail, -1);
  stats.generatedTokens = static_cast<uint32_t>(result.tokens.size());
  stats.cachedTokens = m_backend->cachedTokens();
  report(observer);
  return result;
}

}  // namespace kvscope::runtime
