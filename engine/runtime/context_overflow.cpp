#include "runtime/context_overflow.h"

#include <algorithm>

#include <fmt/format.h>

namespace kvscope::runtime {
namespace {

uint32_t cachedPrefix(std::span<const int32_t> tokens, const std::vector<int32_t>& history) {
  const auto [a, b] = std::mismatch(tokens.begin(), tokens.end(), history.begin(), history.end());
  return static_cast<uint32_t>(a - tokens.begin());
}

// "N tokens" or "N tokens and R more for the reply".
std::string needs(size_t tokens, uint32_t reserve) {
  return reserve == 0 ? fmt::format("{} tokens", tokens)
                      : fmt::format("{} tokens and {} more for the reply", tokens, reserve);
}

Error tooLong(size_t tokens, uint32_t reserve, uint32_t limit) {
  return Error{ErrorCode::kInvalidArgument,
               fmt::format("the conversation needs {}, but the context holds {}; start a new "
                           "chat, raise the context length, or let the oldest turns go (context "
                           "overflow: truncate-middle or rolling)",
                           needs(tokens, reserve), limit)};
}

// A shift keeps at least the prompt's BOS.
uint32_t bosKeep(std::span<const int32_t> prompt, int32_t bos) {
  return !prompt.empty() && prompt[0] == bos ? 1u : 0u;
}

}  // namespace

Expected<ContextOverflow> parseContextOverflow(std::string_view text) {
  if (text == "stop") return ContextOverflow::kStop;
  if (text == "truncate-middle") return ContextOverflow::kTruncateMiddle;
  if (text == "rolling") return ContextOverflow::kRolling;
  return makeError(ErrorCode::kInvalidArgument,
                   "unknown context overflow '{}' (choose stop, truncate-middle or rolling)", text);
}

const char* contextOverflowName(ContextOverflow overflow) {
  switch (overflow) {
    case ContextOverflow::kStop:
      return "stop";
    case ContextOverflow::kTruncateMiddle:
      return "truncate-middle";
    case ContextOverflow::kRolling:
      return "rolling";
  }
  return "stop";
}

uint32_t replyReserve(ContextOverflow overflow, uint32_t maxTokens, uint32_t contextLimit) {
  if (overflow == ContextOverflow::kStop) return 0;
  return std::min(maxTokens, contextLimit / 4);
}

ContextShift chatShift(const Session& session, std::span<const tokenizer::ChatMessage> messages,
                       ContextOverflow overflow, std::span<const int32_t> prompt,
                       uint32_t maxTokens, const std::string& toolsJson) {
  if (overflow == ContextOverflow::kStop) return {};
  ContextShift shift{.enabled = true, .keep = bosKeep(prompt, session.tokenizer().vocab().bos)};
  if (uint64_t{prompt.size()} + maxTokens <= session.backend().contextLimit()) return shift;
  size_t head = 0;
  while (head < messages.size() && messages[head].role == "system") ++head;
  if (overflow == ContextOverflow::kTruncateMiddle && head < messages.size()) {
    ++head;  // the first exchange: its message and the replies up to the next user message
    while (head < messages.size() && messages[head].role != "user") ++head;
    if (head == messages.size()) return shift;  // the first exchange is the conversation
  }
  if (head == 0) return shift;
  // A template may refuse a conversation of system messages alone: then only BOS stays.
  const auto rendered =
      session.renderChat(messages.first(head), /*addGenerationPrompt=*/false, toolsJson);
  if (!rendered.ok()) return shift;
  const std::vector<int32_t> kept = session.tokenizeChat(*rendered);
  const auto [a, b] = std::mismatch(prompt.begin(), prompt.end(), kept.begin(), kept.end());
  shift.keep = std::max(shift.keep, static_cast<uint32_t>(a - prompt.begin()));
  return shift;
}

ContextShift promptShift(std::span<const int32_t> prompt, ContextOverflow overflow, int32_t bos,
                         uint32_t limit) {
  if (overflow == ContextOverflow::kStop) return {};
  const uint32_t start = bosKeep(prompt, bos);
  if (overflow == ContextOverflow::kRolling) return {.enabled = true, .keep = start};
  return {.enabled = true,
          .keep = std::max(start, std::min(static_cast<uint32_t>(prompt.size()), limit / 4))};
}

Expected<FittedChat> fitChat(const Session& session,
                             std::span<const tokenizer::ChatMessage> messages,
                             ContextOverflow overflow, uint32_t reserve, bool addGenerationPrompt,
                             const std::string& toolsJson, TurnStage* failedAt) {
  const uint32_t limit = session.backend().contextLimit();
  // Exchanges: each starts at a user message (or at the first message after
  // the leading system messages); the system messages are never dropped.
  size_t first = 0;
  while (first < messages.size() && messages[first].role == "system") ++first;
  std::vector<size_t> starts;
  for (size_t i = first; i < messages.size(); ++i)
    if (i == first || messages[i].role == "user") starts.push_back(i);
  starts.push_back(messages.size());
  const size_t exchanges = starts.size() - 1;

  std::vector<bool> keep(exchanges, true);
  auto render = [&]() -> Expected<FittedChat> {
    FittedChat fit;
    fit.messages.assign(messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(first));
    for (size_t g = 0; g < exchanges; ++g) {
      for (size_t i = starts[g]; i < starts[g + 1]; ++i) {
        if (keep[g])
          fit.messages.push_back(messages[i]);
        else
          fit.dropped.push_back(i);
      }
    }
    auto rendered = session.renderChat(fit.messages, addGenerationPrompt, toolsJson);
    if (!rendered.ok()) {
      if (failedAt) *failedAt = TurnStage::kTemplate;
      return rendered.takeError();
    }
    fit.prompt = std::move(rendered).value();
    fit.tokens = session.tokenizeChat(fit.prompt);
    fit.prefill =
        static_cast<uint32_t>(fit.tokens.size()) - cachedPrefix(fit.tokens, session.history());
    return fit;
  };
  auto fits = [&](const FittedChat& f) { return uint64_t{f.tokens.size()} + reserve <= limit; };

  if (failedAt) *failedAt = TurnStage::kContext;  // unless a render says otherwise
  KVS_ASSIGN_OR_RETURN(FittedChat whole, render());
  if (fits(whole)) return whole;
  if (overflow == ContextOverflow::kStop) return tooLong(whole.tokens.size(), reserve, limit);
  // The order exchanges go in: the oldest first, except that truncate-middle
  // keeps the first one as long as anything else can go. The last exchange
  // (the message being answered) always stays.
  std::vector<size_t> order;
  if (exchanges >= 2) {
    const size_t from = overflow == ContextOverflow::kTruncateMiddle ? 1 : 0;
    for (size_t g = from; g + 1 < exchanges; ++g) order.push_back(g);
    if (from == 1) order.push_back(0);
  }
  FittedChat smallest = std::move(whole);
  for (size_t g : order) {
    keep[g] = false;
    KVS_ASSIGN_OR_RETURN(FittedChat fit, render());
    if (fits(fit)) return fit;
    smallest = std::move(fit);
  }
  // Room for the reply is kept where something can go for it; a prompt that
  // fits without it still runs, as under kStop, until the context is full.
  if (smallest.tokens.size() <= limit) return smallest;
  return Error{ErrorCode::kInvalidArgument,
               fmt::format("even the system prompt and the last message need {}, but the context "
                           "holds {}; shorten the message or raise the context length",
                           needs(smallest.tokens.size(), reserve), limit)};
}

Expected<PreparedTurn> prepareChatTurn(const Session& session, const ChatTurnRequest& request,
                                       TurnStage* failedAt) {
  const uint32_t limit = session.backend().contextLimit();
  const uint32_t reserve = replyReserve(request.overflow, request.options.maxTokens, limit);
  PreparedTurn turn;
  KVS_ASSIGN_OR_RETURN(turn.fit, fitChat(session, request.messages, request.overflow, reserve,
                                         /*addGenerationPrompt=*/true, request.toolsJson,
                                         failedAt));
  turn.options = request.options;
  turn.options.shift = chatShift(session, turn.fit.messages, request.overflow, turn.fit.tokens,
                                 request.options.maxTokens, request.toolsJson);
  return turn;
}

Expected<std::vector<int32_t>> fitPrompt(std::span<const int32_t> prompt, ContextOverflow overflow,
                                         uint32_t limit, uint32_t reserve, int32_t bos,
                                         uint32_t& dropped) {
  dropped = 0;
  const size_t keepLeading = !prompt.empty() && bos >= 0 && prompt.front() == bos ? 1 : 0;
  // A prompt the context holds is the user's text as given, even with little
  // room left for the reply.
  if (prompt.size() <= limit) return std::vector<int32_t>(prompt.begin(), prompt.end());
  if (overflow == ContextOverflow::kStop || uint64_t{reserve} + keepLeading >= limit) {
    return makeError(ErrorCode::kInvalidArgument,
                     "the prompt needs {}, but the context holds {}; shorten it, raise the "
                     "context length, or let part of it go (context overflow: truncate-middle or "
                     "rolling)",
                     needs(prompt.size(), reserve), limit);
  }
  const size_t budget = limit - reserve;
  const size_t head = overflow == ContextOverflow::kTruncateMiddle
                          ? std::max<size_t>(budget / 2, keepLeading)
                          : std::min<size_t>(keepLeading, prompt.size());
  const size_t tail = budget - head;
  std::vector<int32_t> kept(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(head));
  kept.insert(kept.end(), prompt.end() - static_cast<std::ptrdiff_t>(tail), prompt.end());
  dropped = static_cast<uint32_t>(prompt.size() - kept.size());
  return kept;
}

}  // namespace kvscope::runtime
