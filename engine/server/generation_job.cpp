#include "server/generation_job.h"

#include <fmt/format.h>

#include "server/stop_trimmer.h"
#include "tokenizer/reasoning.h"

namespace kvscope::server {
namespace {

ApiError cancelledError(bool shuttingDown) {
  if (shuttingDown)
    return {.status = 503, .message = "the server is shutting down", .type = "server_error"};
  // 499 is nginx's "client closed request": nobody reads it, but the
  // request counters show why the request ended.
  return {.status = 499, .message = "the client closed the connection", .type = "server_error"};
}

// Feeds the reply through the stop sequences and the reasoning split to the
// job, and stops the session once a stop sequence is complete or the job was
// cancelled.
class JobObserver : public runtime::Observer {
 public:
  JobObserver(runtime::Session& session, GenerationJob& job, runtime::Observer* next,
              tokenizer::ReasoningSplitter splitter)
      : m_session(session),
        m_job(job),
        m_next(next),
        m_trimmer(job.sampling().stop),
        m_splitter(std::move(splitter)) {}

  void onToken(std::string_view text, int32_t token) override {
    if (m_next) m_next->onToken(text, token);
    send(m_trimmer.push(text));
    if (m_trimmer.stopped() || m_job.cancelled()) m_session.requestStop();
  }
  void onProgress(uint32_t done, uint32_t total) override {
    if (m_next) m_next->onProgress(done, total);
    if (m_job.cancelled()) m_session.requestStop();
  }
  void onStep(const runtime::StepStats& stats) override {
    if (m_next) m_next->onStep(stats);
  }
  void onKv(const runtime::KvSnapshot& snapshot) override {
    if (m_next) m_next->onKv(snapshot);
  }
  void onIndexer(const runtime::IndexerSnapshot& snapshot) override {
    if (m_next) m_next->onIndexer(snapshot);
  }

  // The text held back for a stop sequence or a reasoning marker that never came.
  void flush() {
    send(m_trimmer.finish());
    release(m_splitter.finish());
  }
  bool stopSequenceSeen() const { return m_trimmer.stopped(); }
  const std::string& sent() const { return m_sent; }
  const std::string& reasoning() const { return m_reasoning; }

 private:
  void send(const std::string& text) {
    if (!text.empty()) release(m_splitter.push(text));
  }
  void release(const tokenizer::ReasoningParts& parts) {
    if (parts.content.empty() && parts.reasoning.empty()) return;
    m_sent += parts.content;
    m_reasoning += parts.reasoning;
    m_job.release(parts.content, parts.reasoning);
  }

  runtime::Session& m_session;
  GenerationJob& m_job;
  runtime::Observer* m_next;
  StopTrimmer m_trimmer;
  tokenizer::ReasoningSplitter m_splitter;
  std::string m_sent, m_reasoning;
};

runtime::GenerateOptions requestOptions(const SamplingRequest& r,
                                        const runtime::GenerateOptions& defaults) {
  runtime::GenerateOptions o = defaults;
  if (r.maxTokens) o.maxTokens = *r.maxTokens;
  if (r.temperature) o.sampler.temperature = *r.temperature;
  if (r.topP) o.sampler.topP = *r.topP;
  if (r.seed) o.sampler.seed = *r.seed;
  return o;
}

}  // namespace

GenerationJob::GenerationJob(ChatRequest request)
    : m_kind(Kind::kChat), m_chat(std::move(request)) {}

GenerationJob::GenerationJob(CompletionRequest request)
    : m_kind(Kind::kCompletion), m_completion(std::move(request)) {}

const SamplingRequest& GenerationJob::sampling() const {
  return m_kind == Kind::kChat ? m_chat.sampling : m_completion.sampling;
}

GenerationJob::Phase GenerationJob::waitStarted(ApiError& error,
                                                std::chrono::milliseconds timeout) {
  std::unique_lock lock(m_mutex);
  m_changed.wait_for(lock, timeout,
                     [&] { return m_phase != Phase::kQueued || m_cancelled.load(); });
  if (m_phase == Phase::kQueued) {
    if (!m_cancelled.load()) return Phase::kQueued;
    // Cancelled while queued: the server stopping, or the client gone (then
    // nobody reads the answer).
    error = cancelledError(true);
    return Phase::kFailed;
  }
  if (m_phase == Phase::kFailed) error = *m_error;
  return m_phase;
}

GenerationJob::Update GenerationJob::take(std::chrono::milliseconds timeout) {
  std::unique_lock lock(m_mutex);
  m_changed.wait_for(lock, timeout, [&] {
    return !m_text.empty() || !m_reasoning.empty() || m_phase == Phase::kFinished ||
           m_phase == Phase::kFailed;
  });
  Update u;
  u.text = std::exchange(m_text, {});
  u.reasoning = std::exchange(m_reasoning, {});
  u.phase = m_phase;
  u.error = m_error;
  u.finish = m_finish;
  u.usage = m_usage;
  return u;
}

void GenerationJob::cancel() {
  {
    std::lock_guard lock(m_mutex);
    m_cancelled.store(true);
  }
  m_changed.notify_all();
}

void GenerationJob::start() {
  {
    std::lock_guard lock(m_mutex);
    m_phase = Phase::kRunning;
  }
  m_changed.notify_all();
}

void GenerationJob::release(std::string_view text, std::string_view reasoning) {
  {
    std::lock_guard lock(m_mutex);
    m_text += text;
    m_reasoning += reasoning;
  }
  m_changed.notify_all();
}

void GenerationJob::finish(FinishReason finish, const Usage& usage) {
  {
    std::lock_guard lock(m_mutex);
    m_finish = finish;
    m_usage = usage;
    m_phase = Phase::kFinished;
  }
  m_changed.notify_all();
}

void GenerationJob::fail(ApiError error) {
  {
    std::lock_guard lock(m_mutex);
    m_error = std::move(error);
    m_phase = Phase::kFailed;
  }
  m_changed.notify_all();
}

std::optional<JobOutcome> runJob(SessionSlots& slots, GenerationJob& job,
                                 const runtime::GenerateOptions& defaults,
                                 runtime::ContextOverflow overflow, runtime::Observer* observer,
                                 std::string& warning) {
  if (job.cancelled()) {
    job.fail(cancelledError(false));
    return std::nullopt;
  }
  auto first = slots.any();
  if (!first.ok()) {
    job.fail({.status = 500, .message = first.error().message, .type = "server_error"});
    return std::nullopt;
  }
  // Every slot renders and tokenizes alike; the prompt then picks its slot.
  runtime::Session& renderer = **first;
  const bool chat = job.kind() == GenerationJob::Kind::kChat;
  const char* param = chat ? "messages" : "prompt";
  runtime::GenerateOptions options = requestOptions(job.sampling(), defaults);
  const uint32_t limit = renderer.backend().contextLimit();
  const uint32_t reserve = runtime::replyReserve(overflow, options.maxTokens, limit);
  auto tooLong = [&](const std::string& message) {
    job.fail(
        {.status = 400, .message = message, .param = param, .code = "context_length_exceeded"});
  };
  std::vector<int32_t> prompt;
  // A chat reply's reasoning goes apart from its answer, in the template's format.
  tokenizer::ReasoningFormat reasoning = tokenizer::ReasoningFormat::kNone;
  bool opensThinking = false;
  if (chat) {
    runtime::TurnStage failedAt = runtime::TurnStage::kContext;
    auto turn = runtime::prepareChatTurn(renderer,
                                         {.messages = job.chat().messages,
                                          .toolsJson = job.chat().toolsJson,
                                          .overflow = overflow,
                                          .options = options},
                                         &failedAt);
    if (!turn.ok() && failedAt == runtime::TurnStage::kTemplate) {
      // The model's template refused these messages (its raise_exception,
      // e.g. roles that do not alternate): the request's doing, so a 400.
      job.fail({.status = 400, .message = turn.error().message, .param = "messages"});
      return std::nullopt;
    }
    if (!turn.ok()) {
      tooLong(turn.error().message);
      return std::nullopt;
    }
    warning = turn->fit.prompt.warning;
    reasoning = tokenizer::reasoningFormatOf(renderer.chatTemplate().source());
    opensThinking = tokenizer::promptOpensThinking(turn->fit.prompt.text);
    prompt = std::move(turn->fit.tokens);
    options = std::move(turn->options);
  } else {
    uint32_t dropped = 0;
    auto fit = runtime::fitPrompt(renderer.tokenizeCompletion(job.completion().prompt), overflow,
                                  limit, reserve, renderer.tokenizer().vocab().bos, dropped);
    if (!fit.ok()) {
      tooLong(fit.error().message);
      return std::nullopt;
    }
    prompt = std::move(*fit);
    options.shift =
        runtime::promptShift(prompt, overflow, renderer.tokenizer().vocab().bos, limit);
  }
  if (prompt.empty()) {
    job.fail({.status = 400, .message = "the prompt is empty", .param = param});
    return std::nullopt;
  }
  // "Until the context is full" (no max_tokens, no -n) would never end once the
  // context shifts: such a reply gets at most one context's worth of tokens.
  if (options.shift.enabled && !job.sampling().maxTokens)
    options.maxTokens = std::min(options.maxTokens, limit);
  auto slot = slots.acquire(prompt);
  if (!slot.ok()) {
    job.fail({.status = 500, .message = slot.error().message, .type = "server_error"});
    return std::nullopt;
  }
  runtime::Session& session = **slot;
  job.start();
  // Harmony's channel markers are special tokens: decoded as text for the split.
  options.renderSpecial = reasoning == tokenizer::ReasoningFormat::kHarmony;
  JobObserver relay(session, job, observer, tokenizer::ReasoningSplitter(reasoning, opensThinking));
  auto result = session.generate(prompt, options, &relay);
  if (job.cancelled()) {
    job.fail(cancelledError(false));
    JobOutcome out{.text = relay.sent(), .reasoning = relay.reasoning(), .cancelled = true};
    if (result.ok()) out.stats = result->stats;
    return out;
  }
  if (!result.ok()) {
    const bool user = result.error().code == ErrorCode::kInvalidArgument;
    job.fail({.status = user ? 400 : 500,
              .message = result.error().message,
              .type = user ? "invalid_request_error" : "server_error"});
    return std::nullopt;
  }
  relay.flush();
  JobOutcome out;
  out.text = relay.sent();
  out.reasoning = relay.reasoning();
  out.stats = result->stats;
  const bool length =
      !relay.stopSequenceSeen() && (result->stop == runtime::StopReason::kMaxTokens ||
                                    result->stop == runtime::StopReason::kContextFull);
  out.finish = length ? FinishReason::kLength : FinishReason::kStop;
  out.usage = {.promptTokens = static_cast<uint32_t>(prompt.size()),
               .completionTokens = static_cast<uint32_t>(result->tokens.size()),
               .cachedTokens = result->stats.reusedTokens};
  job.finish(out.finish, out.usage);
  return out;
}

}  // namespace kvscope::server
