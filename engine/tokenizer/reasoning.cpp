#include "tokenizer/reasoning.h"

#include <algorithm>
#include <array>
#include <span>
#include <utility>

namespace kvscope::tokenizer {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kStart = "<|start|>";
constexpr std::array<std::string_view, 3> kEnds = {"<|end|>", "<|return|>", "<|call|>"};

bool isSpace(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

// The first position where one of `markers` starts in `text` (`which` gets
// its index), else where the text's tail could still grow into one (`which`
// -1; text.size() if it cannot).
size_t findMarker(std::string_view text, std::span<const std::string_view> markers, int& which) {
  which = -1;
  size_t best = std::string_view::npos, longest = 0;
  for (size_t i = 0; i < markers.size(); ++i) {
    longest = std::max(longest, markers[i].size());
    const size_t at = text.find(markers[i]);
    if (at < best) {
      best = at;
      which = static_cast<int>(i);
    }
  }
  if (best != std::string_view::npos) return best;
  // Only a tail shorter than the longest marker can be one's beginning.
  for (size_t from = text.size() >= longest ? text.size() - longest + 1 : 0; from < text.size();
       ++from) {
    const std::string_view tail = text.substr(from);
    for (std::string_view m : markers)
      if (m.starts_with(tail)) return from;
  }
  return text.size();
}

}  // namespace

ReasoningFormat reasoningFormatOf(std::string_view source) {
  if (source.find(kChannel) != std::string_view::npos &&
      source.find(kMessage) != std::string_view::npos)
    return ReasoningFormat::kHarmony;
  if (source.find(kThinkClose) != std::string_view::npos) return ReasoningFormat::kThinkTags;
  return ReasoningFormat::kNone;
}

bool promptOpensThinking(std::string_view prompt) {
  const size_t open = prompt.rfind(kThinkOpen), close = prompt.rfind(kThinkClose);
  return open != std::string_view::npos && (close == std::string_view::npos || open > close);
}

ReasoningSplitter::ReasoningSplitter(ReasoningFormat format, bool startsInReasoning)
    : m_format(format),
      m_state(format == ReasoningFormat::kHarmony ? State::kHeader
              : startsInReasoning                 ? State::kReasoning
                                                  : State::kContent),
      m_skipSpace(startsInReasoning) {}

ReasoningParts ReasoningSplitter::push(std::string_view piece) {
  ReasoningParts out;
  m_held += piece;
  run(out, false);
  return out;
}

ReasoningParts ReasoningSplitter::finish() {
  ReasoningParts out;
  run(out, true);
  return out;
}

void ReasoningSplitter::place(ReasoningParts& out, size_t n) {
  std::string_view text = std::string_view(m_held).substr(0, n);
  if (m_skipSpace) {
    const size_t keep = std::find_if_not(text.begin(), text.end(), isSpace) - text.begin();
    text.remove_prefix(keep);
    if (!text.empty()) m_skipSpace = false;
  }
  (m_state == State::kReasoning ? out.reasoning : out.content) += text;
  m_held.erase(0, n);
}

void ReasoningSplitter::run(ReasoningParts& out, bool final) {
  if (m_format == ReasoningFormat::kNone) {
    out.content += std::exchange(m_held, {});
    return;
  }
  for (;;) {
    int which = -1;
    if (m_state == State::kHeader) {
      // A header runs to <|message|>; text before any marker at the very
      // start is a reply without channels: the answer.
      const std::array<std::string_view, 1> message = {kMessage};
      const size_t at = findMarker(m_held, message, which);
      if (which < 0) {
        if (final || (m_header.empty() && at > 0 && m_held.rfind("<|", 0) != 0)) {
          if (m_header.empty()) {  // no channel: the reply is plain text
            m_state = State::kContent;
            continue;
          }
          m_held.clear();  // an unfinished header carries no text
          return;
        }
        m_header += m_held.substr(0, at);
        m_held.erase(0, at);
        return;
      }
      m_header += m_held.substr(0, at);
      m_held.erase(0, at + kMessage.size());
      const size_t channel = m_header.find(kChannel);
      std::string_view name;
      if (channel != std::string::npos) {
        name = std::string_view(m_header).substr(channel + kChannel.size());
        name = name.substr(0, name.find_first_of(" <"));
      }
      m_state = name == "analysis" ? State::kReasoning : State::kContent;
      m_header.clear();
      continue;
    }
    std::array<std::string_view, 4> markers{};
    size_t count = 0;
    if (m_format == ReasoningFormat::kThinkTags) {
      markers[count++] = m_state == State::kReasoning ? kThinkClose : kThinkOpen;
    } else {
      for (std::string_view e : kEnds) markers[count++] = e;
      markers[count++] = kStart;
    }
    const size_t at = findMarker(m_held, std::span(markers.data(), count), which);
    if (which < 0) {
      place(out, final ? m_held.size() : at);
      return;
    }
    place(out, at);
    m_held.erase(0, markers[static_cast<size_t>(which)].size());
    if (m_format == ReasoningFormat::kThinkTags) {
      m_state = m_state == State::kReasoning ? State::kContent : State::kReasoning;
      m_skipSpace = true;
    } else {
      // A message ended (or a header began): the next one's header follows.
      m_state = State::kHeader;
      if (markers[static_cast<size_t>(which)] == kStart) m_header = std::string(kStart);
      m_skipSpace = false;
    }
  }
}

}  // namespace kvscope::tokenizer
