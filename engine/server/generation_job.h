#pragma once
// GenerationJob: one served request on its way from the HTTP thread that
// received it to the session's thread and back. The HTTP thread creates it,
// waits until it starts (or fails: a prompt too long for the context), then
// takes the released text piece by piece until it ends; the session's thread
// runs it with runJob(). Either side may cancel it (client gone, server
// stopping); the session's thread then stops the generation at its next step.
// Every method is thread-safe.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

#include "runtime/context_overflow.h"
#include "runtime/session.h"
#include "server/openai_api.h"
#include "server/session_slots.h"

namespace kvscope::server {

class GenerationJob {
 public:
  enum class Kind { kChat, kCompletion };
  enum class Phase { kQueued, kRunning, kFinished, kFailed };

  // What the HTTP side takes at once: released text (the answer, and the
  // reasoning split from it), and how the job ended.
  struct Update {
    std::string text;
    std::string reasoning;
    Phase phase = Phase::kQueued;
    std::optional<ApiError> error;  // kFailed
    FinishReason finish = FinishReason::kStop;
    Usage usage;
  };

  explicit GenerationJob(ChatRequest request);
  explicit GenerationJob(CompletionRequest request);

  Kind kind() const { return m_kind; }
  const SamplingRequest& sampling() const;
  const ChatRequest& chat() const { return m_chat; }
  const CompletionRequest& completion() const { return m_completion; }

  // HTTP side. Blocks up to `timeout` until the job left the queue: kRunning,
  // or kFailed with the error (a job the server cancelled fails with 503);
  // kQueued when it is still waiting.
  Phase waitStarted(ApiError& error, std::chrono::milliseconds timeout);
  // Blocks up to `timeout` for new text or the end; takes what there is.
  Update take(std::chrono::milliseconds timeout);

  void cancel();
  bool cancelled() const { return m_cancelled.load(); }

  // Session side.
  void start();
  void release(std::string_view text, std::string_view reasoning = {});
  void finish(FinishReason finish, const Usage& usage);
  void fail(ApiError error);

 private:
  Kind m_kind;
  ChatRequest m_chat;
  CompletionRequest m_completion;
  std::atomic<bool> m_cancelled{false};
  std::mutex m_mutex;
  std::condition_variable m_changed;
  Phase m_phase = Phase::kQueued;  // guarded by m_mutex, like the fields below
  std::string m_text;              // released, not yet taken
  std::string m_reasoning;
  std::optional<ApiError> m_error;
  FinishReason m_finish = FinishReason::kStop;
  Usage m_usage;
};

// How one run went, for the server's counters and the app's history.
struct JobOutcome {
  std::string text;       // the answer the client got (stop sequences trimmed)
  std::string reasoning;  // and the reasoning split from it
  FinishReason finish = FinishReason::kStop;
  Usage usage;
  runtime::StepStats stats;
  bool cancelled = false;  // stopped because the job was cancelled
};

// Runs `job` in one of `slots` (the session's thread): renders its messages
// with the chat template (or tokenizes its prompt); when the prompt does not
// fit the context, applies `overflow` (runtime/context_overflow.h) or fails it
// with 400 context_length_exceeded; then generates, in the slot the prompt
// reuses most of, with `defaults` overridden by the request, releasing text
// as stop sequences allow, the model's reasoning apart from its answer
// (tokenizer/reasoning.h: the chat template's format). `observer` gets the Session's reports too.
// Null when the job failed or was cancelled before it generated anything (a job cancelled while
// queued is dropped before its prompt is read). `warning` receives the chat template's warning, if
// any.
std::optional<JobOutcome> runJob(SessionSlots& slots, GenerationJob& job,
                                 const runtime::GenerateOptions& defaults,
                                 runtime::ContextOverflow overflow, runtime::Observer* observer,
                                 std::string& warning);

}  // namespace kvscope::server
