#include "runtime/session.h"

#include <algorithm>
#include <cassert>
#include <new>
#include <utility>

#include <fmt/format.h>

#include "backend/backend.h"
#include "kv/kv_policy.h"
#include "runtime/indexer_heads.h"
#include "runtime/kv_auto.h"
#include "runtime/kv_reencode.h"
#include "tokenizer/detokenizer.h"

namespace kvscope::runtime {
namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The model's file or folder name, for messages.
std::string modelName(const model::ModelFile* model) {
  return model ? model->path().filename().string() : std::string();
}

// Whether dense heads measured under `measured` hold under `policy`: both
// auto, with the same selection (heads are measured against it).
bool headsCarryOver(const kv::IndexerOptions& measured, const kv::IndexerOptions& policy) {
  return measured.autoDenseHeads && policy.autoDenseHeads && measured.topK == policy.topK &&
         measured.window == policy.window && measured.sinks == policy.sinks &&
         measured.pageRows == policy.pageRows && measured.pageScore == policy.pageScore &&
         measured.denseLayers == policy.denseLayers;
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
                 BackendFactory factory, kv::KvPolicy kvPolicy)
    : Session(std::move(model), std::move(backend),
              std::make_shared<const tokenizer::Tokenizer>(std::move(tokenizer)),
              std::move(factory), std::move(kvPolicy)) {}

Session::Session(std::shared_ptr<const model::ModelFile> model,
                 std::unique_ptr<backend::Backend> backend,
                 std::shared_ptr<const tokenizer::Tokenizer> tokenizer, BackendFactory factory,
                 kv::KvPolicy kvPolicy)
    : m_model(std::move(model)),
      m_backend(std::move(backend)),
      m_factory(std::move(factory)),
      m_tokenizer(std::move(tokenizer)),
      m_chatTemplate(m_tokenizer->vocab().chatTemplate, modelName(m_model.get())) {
  for (const auto& [name, source] : m_tokenizer->vocab().namedChatTemplates) {
    if (name == "tool_use") m_toolTemplate.emplace(source, modelName(m_model.get()));
  }
  setPolicy(std::move(kvPolicy));
}

Expected<std::unique_ptr<Session>> Session::sibling() const {
  if (!m_factory) {
    return makeError(ErrorCode::kUnsupported,
                     "this session was opened without a backend factory, so it cannot open "
                     "another conversation on its model");
  }
  KVS_ASSIGN_OR_RETURN(std::unique_ptr<backend::Backend> backend, m_factory(m_kvPolicy));
  KVS_TRY(backend->setIndexer(m_backend->indexer()));
  std::unique_ptr<Session> s(
      new Session(m_model, std::move(backend), m_tokenizer, m_factory, m_kvPolicy));
  // Measured dense heads are the model's, not the conversation's.
  s->m_denseHeads = m_denseHeads;
  s->m_denseHeadsNote = m_denseHeadsNote;
  s->m_chatTemplate = m_chatTemplate;
  s->m_toolTemplate = m_toolTemplate;
  s->m_chatSettings = m_chatSettings;
  return s;
}

std::vector<int32_t> Session::tokenizeCompletion(std::string_view text) const {
  return m_tokenizer->encode(text, {.addSpecial = true, .parseSpecial = false});
}

void Session::setChatTemplateSource(std::string source) {
  m_chatTemplate = tokenizer::ChatTemplate(std::move(source), modelName(m_model.get()));
  m_toolTemplate.reset();
}

Expected<tokenizer::ChatPrompt> Session::renderChat(
    std::span<const tokenizer::ChatMessage> messages, bool addGenerationPrompt,
    std::string toolsJson) const {
  const auto& v = m_tokenizer->vocab();
  tokenizer::ChatOptions options;
  options.addGenerationPrompt = addGenerationPrompt;
  if (v.bos != tokenizer::kNoToken) options.bosToken = std::string(m_tokenizer->piece(v.bos, true));
  if (v.eos != tokenizer::kNoToken) options.eosToken = std::string(m_tokenizer->piece(v.eos, true));
  options.renderer = m_chatSettings.renderer;
  options.enableThinking = m_chatSettings.enableThinking;
  options.toolsJson = std::move(toolsJson);
  const tokenizer::ChatTemplate& chat =
      !options.toolsJson.empty() && m_toolTemplate ? *m_toolTemplate : m_chatTemplate;
  KVS_ASSIGN_OR_RETURN(tokenizer::ChatPrompt prompt, chat.render(messages, options));
  if (prompt.plain && m_chatTemplate.empty() &&
      prompt.renderer == tokenizer::ChatRenderer::kTemplate)
    prompt.warning = tokenizer::missingTemplateWarning(*m_tokenizer);
  return prompt;
}

std::vector<int32_t> Session::tokenizeChat(const tokenizer::ChatPrompt& prompt) const {
  return tokenizer::encodeChatPrompt(*m_tokenizer, prompt);
}

Status Session::trim(uint32_t n) {
  if (n > m_history.size()) return okStatus();
  KVS_TRY(m_backend->trim(n));
  m_history.resize(n);
  return okStatus();
}

Expected<backend::TensorDump> Session::dumpTensor(std::span<const int32_t> tokens,
                                                  const std::string& name) {
  if (tokens.empty()) return makeError(ErrorCode::kInvalidArgument, "no tokens to run");
  KVS_TRY(trim(0));
  backend::Logits logits;
  m_backend->setDumpTarget(name);
  const Status run = m_backend->forward({tokens}, logits);
  backend::TensorDump dump = m_backend->dumped();
  if (run.ok() && dump.rows == 0 && name != backend::kListTensorNames) {
    // The names this step computed, for the error.
    m_backend->setDumpTarget(std::string(backend::kListTensorNames));
    KVS_TRY(m_backend->trim(0));
    KVS_TRY(m_backend->forward({tokens.first(1)}, logits));
    dump = m_backend->dumped();
  }
  m_backend->setDumpTarget({});
  KVS_TRY(m_backend->trim(0));  // the cache holds no history
  KVS_TRY(run);
  if (dump.rows == 0 && name != backend::kListTensorNames) {
    std::string names;
    for (const std::string& n : dump.names) names += (names.empty() ? "" : ", ") + n;
    return makeError(ErrorCode::kInvalidArgument, "no tensor is named '{}'; this model's are: {}",
                     name, names);
  }
  return dump;
}

Status Session::setKvPolicy(const kv::KvPolicy& policy, Observer* observer, uint32_t chunk) {
  m_stop.store(false);
  if (!m_factory) {
    return makeError(ErrorCode::kUnsupported,
                     "this session was opened without a backend factory; "
                     "its KV cache policy is fixed");
  }
  const model::ModelConfig& c = m_backend->config();
  KVS_TRY(policy.resolve(backend::kvTarget(c)));
  const kv::IndexerOptions attention = attentionFor(policy);
  if (m_kvPolicy.sameCache(policy)) {
    // Only how attention reads the cache changes: no re-encode.
    KVS_TRY(m_backend->setIndexer(attention));
    setPolicy(policy);
    report(observer);
    return okStatus();
  }
  if (policy.autoBits) {
    // Measure on f16 rows of (at most) the calibration window, then settle.
    const size_t measured = std::min<size_t>(m_history.size(), kv::kAutoCalibrationTokens);
    backend::Logits logits;
    KVS_ASSIGN_OR_RETURN(
        auto f16, rebuild(policy, std::span(m_history).first(measured), observer, chunk, logits));
    std::optional<kv::AutoPlan> previousPlan = std::move(m_autoPlan);
    std::unique_ptr<backend::Backend> previous = std::exchange(m_backend, std::move(f16));
    kv::KvPolicy previousPolicy = m_kvPolicy;
    setPolicy(policy);
    m_autoPlan.reset();
    if (m_history.size() < kv::kAutoMinTokens) {
      // Too little to measure yet: the rest of the history, and the choice
      // comes once the conversation is long enough (generate).
      report(observer);
      return okStatus();
    }
    if (auto st = settleAuto(observer, chunk, logits); !st.ok()) {
      m_backend = std::move(previous);
      setPolicy(std::move(previousPolicy));
      m_autoPlan = std::move(previousPlan);
      return st;
    }
    report(observer);
    return okStatus();
  }
  backend::Logits logits;
  KVS_ASSIGN_OR_RETURN(std::unique_ptr<backend::Backend> next,
                       convert(policy, observer, chunk, logits));
  m_backend = std::move(next);
  setPolicy(policy);
  m_autoPlan.reset();
  report(observer);
  return okStatus();
}

Expected<std::unique_ptr<backend::Backend>> Session::convert(const kv::KvPolicy& policy,
                                                             Observer* observer, uint32_t chunk,
                                                             backend::Logits& logits) {
  // Two-phase caches change layout at the first decode step, and a precision
  // tail holds full-precision rows no re-encode can give back: run again.
  const kv::KvLayout* from = m_backend->kvLayout();
  if (policy.twoPhase || m_kvPolicy.twoPhase || policy.tail != 0 || m_kvPolicy.tail != 0 || !from ||
      m_backend->cachedTokens() != m_history.size()) {
    return rebuild(policy, m_history, observer, chunk, logits);
  }
  KVS_ASSIGN_OR_RETURN(std::unique_ptr<backend::Backend> next, build(policy));
  if (!next->kvLayout() || !canReencode(*from, *next->kvLayout())) {
    KVS_TRY(replay(*next, m_history, observer, chunk, logits));
    return next;
  }
  Status converted = okStatus();
  try {
    converted = reencodeKv(*m_backend, *next);
  } catch (const std::bad_alloc&) {
    // The host copy of the new cache did not fit: run the history instead.
    converted = makeError(ErrorCode::kOutOfMemory, "out of memory");
  }
  if (!converted.ok() && converted.error().code == ErrorCode::kOutOfMemory) {
    // reencodeKv leaves `next` empty on an error.
    KVS_TRY(replay(*next, m_history, observer, chunk, logits));
    return next;
  }
  KVS_TRY(converted);
  if (m_stop.load()) return makeError(ErrorCode::kCancelled, "stopped while re-encoding the cache");
  const auto n = static_cast<uint32_t>(m_history.size());
  if (observer) observer->onProgress(n, n);
  return next;
}

Expected<std::unique_ptr<backend::Backend>> Session::rebuild(const kv::KvPolicy& policy,
                                                             std::span<const int32_t> tokens,
                                                             Observer* observer, uint32_t chunk,
                                                             backend::Logits& logits) {
  KVS_ASSIGN_OR_RETURN(std::unique_ptr<backend::Backend> next, build(policy));
  KVS_TRY(replay(*next, tokens, observer, chunk, logits));
  return next;
}

Expected<std::unique_ptr<backend::Backend>> Session::build(const kv::KvPolicy& policy) {
  KVS_ASSIGN_OR_RETURN(std::unique_ptr<backend::Backend> next, m_factory(policy));
  KVS_TRY(next->setIndexer(attentionFor(policy)));
  return next;
}

Status Session::replay(backend::Backend& next, std::span<const int32_t> tokens,
                       Observer* observer, uint32_t chunk, backend::Logits& logits) {
  // The history is the conversation as the model saw it; the new cache is
  // built the way a fresh session would build it, so both hold the same rows.
  const size_t step = std::max<uint32_t>(chunk, 1);
  for (size_t done = 0; done < tokens.size();) {
    if (m_stop.load())
      return makeError(ErrorCode::kCancelled, "stopped while re-encoding the cache");
    const size_t n = std::min(step, tokens.size() - done);
    KVS_TRY(next.forward({.tokens = tokens.subspan(done, n), .prompt = true}, logits));
    done += n;
    if (observer)
      observer->onProgress(static_cast<uint32_t>(done), static_cast<uint32_t>(tokens.size()));
  }
  return okStatus();
}

bool Session::autoPending() const {
  return m_kvPolicy.autoBits && !m_autoPlan && m_autoFailure.empty();
}

void Session::setPolicy(kv::KvPolicy policy) {
  m_autoFailure.clear();
  if (!headsCarryOver(m_kvPolicy.attention, policy.attention)) {
    m_denseHeads.reset();
    m_denseHeadsNote.clear();
  }
  m_kvPolicy = std::move(policy);
}

kv::IndexerOptions Session::attentionFor(const kv::KvPolicy& policy) const {
  kv::IndexerOptions attention = policy.attention;
  attention.diagnostic = m_backend->indexer().diagnostic;
  // m_denseHeads were measured under m_kvPolicy (setPolicy drops them
  // otherwise).
  if (m_denseHeads && headsCarryOver(m_kvPolicy.attention, attention)) {
    attention.autoDenseHeads = false;
    attention.denseHeads = *m_denseHeads;
  }
  return attention;
}

bool Session::denseHeadsPending() const {
  const kv::IndexerOptions& a = m_kvPolicy.attention;
  return a.enabled() && a.autoDenseHeads && !m_denseHeads;
}

Status Session::settleDenseHeads(uint32_t chunk, backend::Logits& logits) {
  kv::IndexerOptions options = m_kvPolicy.attention;
  options.diagnostic = m_backend->indexer().diagnostic;
  Expected<AutoHeads> settled = settleAutoHeads(*m_backend, m_history, options, chunk, logits);
  if (!settled) {
    // A run failed: the history keeps what the cache holds.
    m_history.resize(std::min<size_t>(m_history.size(), m_backend->cachedTokens()));
    return settled.error();
  }
  m_denseHeads = settled->heads;
  m_denseHeadsNote = settled->describe();
  return okStatus();
}

Status Session::settleAuto(Observer* observer, uint32_t chunk, backend::Logits& logits) {
  // Any failure but a stop ends the attempt for good: the cache stays f16
  // and autoFailure says why (rather than failing again at every turn).
  auto attempt = [&]() -> Status {
    if (!m_factory) {
      return makeError(ErrorCode::kUnsupported,
                       "this session was opened without a backend factory, so auto cannot "
                       "re-encode its cache");
    }
    KVS_ASSIGN_OR_RETURN(
        AutoChoice choice,
        chooseAutoPolicy(*m_backend, m_kvPolicy,
                         {.factory = &m_factory, .tokens = m_history, .cancel = &m_stop}));
    // Runs the history again, so that the cache equals a fresh session's under
    // the choice (re-encoding the measured f16 rows, as convert() does for an
    // explicit switch, would skip that prefill).
    KVS_ASSIGN_OR_RETURN(auto next, rebuild(choice.policy, m_history, observer, chunk, logits));
    m_backend = std::move(next);
    m_autoPlan = std::move(choice.plan);
    return okStatus();
  };
  Status st = okStatus();
  try {
    st = attempt();
  } catch (const std::bad_alloc&) {
    st = makeError(ErrorCode::kOutOfMemory, "out of memory");
  }
  if (!st.ok() && st.error().code != ErrorCode::kCancelled) m_autoFailure = st.error().message;
  return st;
}

Status Session::setIndexerDiagnostic(bool on) {
  kv::IndexerOptions options = m_backend->indexer();
  options.diagnostic = on;
  return m_backend->setIndexer(options);
}

void Session::report(Observer* observer) const {
  if (!observer) return;
  KvSnapshot kv = snapshotKv(*m_backend);
  if (m_autoPlan) {
    const kv::AutoPlan& plan = *m_autoPlan;
    kv.autoStatus = fmt::format("auto:{} chose {}{:.2f} bits per value on average", plan.budget,
                                plan.method.empty() ? "" : plan.method + ", ", plan.bitsPerValue);
    if (!plan.untried.empty())
      kv.autoStatus += fmt::format(" (its candidate plans were not tried: {})", plan.untried);
    for (const kv::AutoTrial& t : plan.trials) {
      if (t.method != plan.method) continue;
      kv.autoStatus += fmt::format(
          " (the best of {} plans tried on the last {} calibration tokens: KLD {:.1e} against f16)",
          plan.trials.size(), plan.trialTokens, t.kld);
    }
    for (size_t l = 0; l < kv.layers.size() && l < m_autoPlan->layers.size(); ++l) {
      kv.layers[l].keyPromotion = m_autoPlan->layers[l].key.reason;
      kv.layers[l].valuePromotion = m_autoPlan->layers[l].value.reason;
    }
  } else if (m_kvPolicy.autoBits && !m_autoFailure.empty()) {
    kv.autoStatus = fmt::format("{} could not re-encode the cache ({}); it stays f16",
                                m_kvPolicy.toString(), m_autoFailure);
  } else if (autoPending()) {
    kv.autoMeasuring = true;
    kv.autoMeasureTokens = kv::kAutoMinTokens;
    kv.autoStatus =
        m_history.empty()
            ? fmt::format("{} is measuring: the cache is f16 until the first prompt has run (at "
                          "least {} tokens); then each layer's schemes are chosen from its rows",
                          m_kvPolicy.toString(), kv::kAutoMinTokens)
            : fmt::format("{} is measuring: the cache stays f16 until the conversation reaches "
                          "{} tokens (now {}); then each layer's schemes are chosen from its rows",
                          m_kvPolicy.toString(), kv::kAutoMinTokens, m_history.size());
  }
  observer->onKv(kv);
  if (m_backend->indexer().enabled()) {
    IndexerSnapshot indexer = snapshotIndexer(*m_backend);
    indexer.denseHeadsNote = m_denseHeadsNote;
    const uint32_t needed = autoHeadsMinTokens(m_kvPolicy.attention);
    if (denseHeadsPending() && needed > m_backend->contextLimit()) {
      indexer.denseHeadsNote = fmt::format(
          "indexer_dense_heads=auto measures once {} tokens are cached, more than this context "
          "holds ({}), so every layer reads every row; name the heads instead "
          "(indexer_dense_heads=L.H: `kvscope-cli indexer-heads` measures them on a text)",
          needed, m_backend->contextLimit());
    } else if (denseHeadsPending()) {
      indexer.denseHeadsNote = fmt::format(
          "indexer_dense_heads=auto: every layer reads every row until a prompt leaves {} tokens "
          "cached; then the KV heads the selection misses are measured and kept dense",
          needed);
    }
    observer->onIndexer(indexer);
  }
  if (m_backend->config().nExpert > 0) observer->onExperts(m_backend->expertUsage());
}

// forward() on the history's cache; a failed one that lost rows (a window
// ring that moved on, backend.h) takes the history with it.
Status Session::run(std::span<const int32_t> tokens, backend::Logits& logits, bool prompt) {
  const Status status = m_backend->forward({.tokens = tokens, .prompt = prompt}, logits);
  if (!status.ok() && m_backend->cachedTokens() < m_history.size())
    m_history.resize(m_backend->cachedTokens());
  return status;
}

Status Session::shiftContext(uint32_t keep, uint32_t chunk, StepStats& stats) {
  const auto t0 = Clock::now();
  const size_t n = m_history.size();
  assert(n > keep + 1);  // generate() shifts only when a token after `keep` can go
  const size_t dropped = std::max<size_t>((n - keep) / 2, 1);
  // The kept prefix runs again too where the sliding-window layers no longer
  // hold what follows it.
  const size_t from = keep > 0 && keep < m_backend->trimFloor() ? 0 : keep;
  std::vector<int32_t> tail(m_history.begin() + from, m_history.begin() + keep);
  tail.insert(tail.end(), m_history.begin() + keep + dropped, m_history.end());
  KVS_TRY(trim(static_cast<uint32_t>(from)));
  backend::Logits unused;
  for (size_t done = 0; done < tail.size();) {
    // A stop leaves the cache holding what was re-run so far, the history alike.
    if (m_stop.load()) return makeError(ErrorCode::kCancelled, "stopped during a context shift");
    const size_t take = std::min<size_t>(std::max<uint32_t>(chunk, 1), tail.size() - done);
    KVS_TRY(run(std::span(tail).subspan(done, take), unused, true));
    m_history.insert(m_history.end(), tail.begin() + done, tail.begin() + done + take);
    done += take;
  }
  ++stats.contextShifts;
  stats.shiftedTokens += static_cast<uint32_t>(dropped);
  stats.shiftMs += msSince(t0);
  return okStatus();
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
  // Sliding-window layers cannot go back further than the rows they hold.
  if (common > 0 && common < m_backend->trimFloor()) common = 0;
  KVS_TRY(trim(static_cast<uint32_t>(common)));
  stats.reusedTokens = static_cast<uint32_t>(common);
  const auto t0 = Clock::now();
  const size_t total = prompt.size() - common;
  const size_t chunk = std::max<uint32_t>(options.prefillChunk, 1);
  for (size_t done = 0; done < total;) {
    if (m_stop.load()) return makeError(ErrorCode::kCancelled, "stopped during prompt processing");
    size_t n = std::min(chunk, total - done);
    // An auto policy measures its calibration window, no more, in f16.
    const bool measuring = autoPending();
    if (measuring && m_history.size() < kv::kAutoCalibrationTokens)
      n = std::min(n, kv::kAutoCalibrationTokens - m_history.size());
    KVS_TRY(run(prompt.subspan(common + done, n), logits, true));
    m_history.insert(m_history.end(), prompt.begin() + common + done,
                     prompt.begin() + common + done + n);
    done += n;
    if (measuring && m_history.size() >= kv::kAutoMinTokens &&
        (m_history.size() >= kv::kAutoCalibrationTokens || done == total)) {
      // The re-encode runs the history again and leaves its last logits. If
      // it fails (out of memory), the prompt goes on in the f16 cache.
      if (auto st = settleAuto(observer, static_cast<uint32_t>(chunk), logits); !st.ok()) {
        if (st.error().code == ErrorCode::kCancelled) return st;
      }
    }
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
  if (denseHeadsPending() && m_history.size() >= autoHeadsMinTokens(m_kvPolicy.attention))
    KVS_TRY(settleDenseHeads(options.prefillChunk, logits));
  // The inspector follows the cache while decoding, at a rate a person can read.
  auto lastKv = Clock::now();
  report(observer);
  tokenizer::IncrementalDecoder decoder(
      *m_tokenizer, {.renderSpecial = options.renderSpecial, .stripLeadingSpace = false});
  // Capped so that a shift always frees room (ContextShift::keep).
  const uint32_t shiftKeep = std::min(options.shift.keep, limit / 4);
  result.stop = StopReason::kMaxTokens;
  while (result.tokens.size() < options.maxTokens) {
    if (m_stop.load()) {
      result.stop = StopReason::kStopRequested;
      break;
    }
    const int32_t token = sampler.sample(logits.last());
    sampler.accept(token);
    if (m_tokenizer->isEndOfGeneration(token)) {
      result.stop = StopReason::kEndOfGeneration;
      break;
    }
    result.tokens.push_back(token);
    const std::string piece = decoder.push(token);
    result.text += piece;
    if (observer) observer->onToken(piece, token);
    // A shift needs a token to drop after the kept ones (a context of 1 has none).
    const bool canShift = options.shift.enabled && m_history.size() > shiftKeep + 1;
    if (m_history.size() >= limit && !canShift) {
      result.stop = StopReason::kContextFull;
      break;
    }
    if (result.tokens.size() == options.maxTokens) break;  // no need to run the last token
    if (m_history.size() >= limit) {
      if (const Status shifted = shiftContext(shiftKeep, options.prefillChunk, stats);
          !shifted.ok()) {
        if (shifted.error().code != ErrorCode::kCancelled) return shifted.error();
        result.stop = StopReason::kStopRequested;
        break;
      }
      report(observer);
    }
    const auto t0 = Clock::now();
    KVS_TRY(run(std::span(&token, 1), logits, false));
    m_history.push_back(token);
    // An auto policy whose first prompt was short chooses once the
    // conversation is long enough to measure.
    if (m_history.size() >= kv::kAutoMinTokens && autoPending()) {
      // A stop during that re-encode ends the reply as a stop; the f16 cache
      // stays and auto chooses at the next turn.
      if (auto st = settleAuto(observer, options.prefillChunk, logits);
          !st.ok() && st.error().code == ErrorCode::kCancelled) {
        result.stop = StopReason::kStopRequested;
        break;
      }
    }
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
