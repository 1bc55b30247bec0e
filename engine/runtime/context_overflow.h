#pragma once
// What happens when a conversation no longer fits the context: the user's
// choice, applied before a turn is prefilled.
//
//   stop             refuse the turn with a message that says how to go on
//   truncate-middle  keep the system prompt and the first exchange; drop the
//                    oldest exchanges after it until the rest fits (the first
//                    exchange too, last, when that is not enough)
//   rolling          keep the newest exchanges that fit (and the system prompt)
//
// An exchange is a user message and the replies after it; the last one (the
// message being answered) is always kept. "Fits" leaves room for the reply:
// the rendered prompt plus `reserve` tokens must be at most the context; when
// nothing more can go, a prompt that fits without the reserve still runs. A
// dropped exchange changes the prompt from that point on, so the Session
// reuses the cached prefix before it and prefills the rest again: the cost is
// the kept tokens after the first dropped one (FittedChat::prefill).
//
// For a plain prompt (generate, /v1/completions) the same choices act on the
// tokens of a prompt longer than the context: truncate-middle keeps its first
// and last tokens, rolling its last (and its BOS).

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "runtime/session.h"

namespace kvscope::runtime {

enum class ContextOverflow { kStop, kTruncateMiddle, kRolling };

// "stop", "truncate-middle", "rolling"; an error naming the choices otherwise.
Expected<ContextOverflow> parseContextOverflow(std::string_view text);
const char* contextOverflowName(ContextOverflow overflow);

// The room a turn keeps for its reply under `overflow`: none under kStop,
// which refuses only a prompt longer than the context and lets the reply run
// until the context is full (kContextFull); else the smaller of `maxTokens`
// and a quarter of the context, so a policy that drops turns leaves the reply
// somewhere to go.
uint32_t replyReserve(ContextOverflow overflow, uint32_t maxTokens, uint32_t contextLimit);

struct FittedChat {
  std::vector<tokenizer::ChatMessage> messages;  // what is rendered
  std::vector<size_t> dropped;                   // indices into the messages given, ascending
  tokenizer::ChatPrompt prompt;
  std::vector<int32_t> tokens;  // prompt, tokenized
  // Of `tokens`, those past the prefix the session has cached: what the turn
  // prefills. After a drop it includes the kept exchanges after the first
  // dropped one, which were cached but now sit at other positions.
  uint32_t prefill = 0;
};

// Which step refused a turn: the chat template (it raised, or cannot render
// these messages), or the context (the prompt does not fit).
enum class TurnStage { kTemplate, kContext };

// Renders `messages` for `session` and applies `overflow` when the prompt and
// `reserve` tokens do not fit its context. Errors: the template's;
// kInvalidArgument under kStop, and when even the system prompt and the last
// message do not fit (the message says how to go on). `failedAt`, when given,
// receives which step refused.
Expected<FittedChat> fitChat(const Session& session,
                             std::span<const tokenizer::ChatMessage> messages,
                             ContextOverflow overflow, uint32_t reserve,
                             bool addGenerationPrompt = true, const std::string& toolsJson = {},
                             TurnStage* failedAt = nullptr);

// A chat turn as the app, the CLI and the server run it.
struct ChatTurnRequest {
  std::span<const tokenizer::ChatMessage> messages;  // the whole conversation
  std::string toolsJson;                             // for templates that take tools
  ContextOverflow overflow = ContextOverflow::kStop;
  GenerateOptions options;  // its `shift` is what prepareChatTurn sets
};
struct PreparedTurn {
  FittedChat fit;           // what is rendered and prefilled; fit.prompt.warning
  GenerateOptions options;  // the request's, with the reply's context shift
};
// The one preparation of a chat turn: renders the conversation with the
// session's template, fits it to the context under the overflow policy
// (replyReserve), tokenizes it, and sets the context shift the reply gets
// (chatShift). Session::generate(fit.tokens, options) then reuses the cached
// prefix and answers; the server runs that on the slot the tokens choose.
// Errors as fitChat's, with `failedAt`.
Expected<PreparedTurn> prepareChatTurn(const Session& session, const ChatTurnRequest& request,
                                       TurnStage* failedAt = nullptr);

// The context shift a reply gets under `overflow` (GenerateOptions::shift):
// none under kStop; otherwise on, keeping what the policy keeps when it drops
// turns: the leading system messages (rolling), or those and the first
// exchange (truncate-middle), as the tokens `prompt` (this conversation,
// rendered and tokenized) starts with; at least its BOS.
// `toolsJson` as the prompt was rendered with; the head is rendered only when
// the prompt and `maxTokens` can reach the end of the context.
ContextShift chatShift(const Session& session, std::span<const tokenizer::ChatMessage> messages,
                       ContextOverflow overflow, std::span<const int32_t> prompt,
                       uint32_t maxTokens, const std::string& toolsJson = {});
// The same for a plain prompt: its BOS (rolling), or its first quarter of the
// context (truncate-middle).
ContextShift promptShift(std::span<const int32_t> prompt, ContextOverflow overflow, int32_t bos,
                         uint32_t limit);

// The token-level form: a prompt longer than `limit` is cut to `limit` -
// `reserve` tokens, keeping its first token when that is `bos` (-1: none);
// `dropped` receives how many tokens were removed.
Expected<std::vector<int32_t>> fitPrompt(std::span<const int32_t> prompt, ContextOverflow overflow,
                                         uint32_t limit, uint32_t reserve, int32_t bos,
                                         uint32_t& dropped);

}  // namespace kvscope::runtime
