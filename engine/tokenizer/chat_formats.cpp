#include "tokenizer/chat_formats.h"

#include <vector>

namespace kvscope::tokenizer {
namespace {

using Messages = std::span<const ChatMessage>;

constexpr std::string_view kDeepseekCoderSystem =
    "You are an AI programming assistant, utilizing the Deepseek Coder model, developed by "
    "Deepseek Company, and you only answer questions related to computer science. For "
    "politically sensitive questions, security and privacy issues, and other non-computer "
    "science questions, you will refuse to answer";
constexpr std::string_view kDeepseekEos = "<｜end▁of▁sentence｜>";
constexpr std::string_view kDeepseekUser = "<｜User｜>";
constexpr std::string_view kDeepseekAssistant = "<｜Assistant｜>";

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// Jinja's trim / Python's str.strip() for the whitespace chat text contains.
std::string trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\v\f";
  const size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return std::string(s.substr(begin, s.find_last_not_of(kSpace) - begin + 1));
}

bool isSystem(const ChatMessage& m) {
  return m.role == "system";
}
bool isAssistant(const ChatMessage& m) {
  return m.role == "assistant";
}

// Formats without a system role fold the system text into a user turn: the
// first, or the last where the template says so (Mistral v0.3).
std::vector<ChatMessage> foldSystemIntoUser(Messages messages, std::string_view separator,
                                            bool intoLast) {
  std::vector<ChatMessage> out;
  std::string system;
  for (const ChatMessage& m : messages) {
    if (!isSystem(m)) {
      out.push_back(m);
    } else {
      system += system.empty() ? m.content : std::string(separator) + m.content;
    }
  }
  if (system.empty()) return out;
  ChatMessage* target = nullptr;
  for (ChatMessage& m : out) {
    if (isAssistant(m)) continue;
    target = &m;
    if (!intoLast) break;
  }
  if (target) {
    target->content = system + std::string(separator) + target->content;
  } else {
    out.insert(out.begin(), ChatMessage{"user", system});
  }
  return out;
}

// The system prompt a ChatML template inserts when the conversation has none
// (Qwen's "You are a helpful assistant."): the literal text between
// "<|im_start|>system\n" and "<|im_end|>", when it is a plain literal.
std::string chatmlDefaultSystem(std::string_view source) {
  for (const std::string_view opener : {"<|im_start|>system\n", "<|im_start|>system\\n"}) {
    size_t at = source.find(opener);
    while (at != std::string_view::npos) {
      const size_t begin = at + opener.size();
      const size_t end = source.find("<|im_end|>", begin);
      if (end == std::string_view::npos) break;
      const std::string_view literal = source.substr(begin, end - begin);
      if (!literal.empty() && literal.find_first_of("{}'\"+\\") == std::string_view::npos) {
        return std::string(literal);
      }
      at = source.find(opener, begin);
    }
  }
  return {};
}

struct RenderContext {
  std::string_view source;
  const FormatOptions& options;
  std::string bos() const { return contains(source, "bos_token") ? options.bosToken : ""; }
};

std::string renderChatml(Messages messages, const RenderContext& ctx) {
  std::string out = ctx.bos();
  const std::string defaultSystem = chatmlDefaultSystem(ctx.source);
  if (!defaultSystem.empty() && (messages.empty() || !isSystem(messages.front()))) {
    out += "<|im_start|>system\n" + defaultSystem + "<|im_end|>\n";
  }
  for (const ChatMessage& m : messages)
    out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (ctx.options.addGenerationPrompt) out += "<|im_start|>assistant\n";
  return out;
}

std::string renderLlama2(Messages messages, const RenderContext& ctx) {
  std::string system;
  if (!messages.empty() && isSystem(messages.front())) {
    system = messages.front().content;
    messages = messages.subspan(1);
  }
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    std::string content = messages[i].content;
    if (i == 0 && !system.empty()) content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
    if (isAssistant(messages[i])) {
      out += " " + trim(content) + " " + ctx.options.eosToken;
    } else {
      out += ctx.bos() + "[INST] " + trim(content) + " [/INST]";
    }
  }
  return out;
}

std::string renderLlama3(Messages messages, const RenderContext& ctx) {
  const auto turn = [](std::string_view role, std::string_view content) {
    return "<|start_header_id|>" + std::string(role) + "<|end_header_id|>\n\n" + trim(content) +
           "<|eot_id|>";
  };
  std::string out;
  // Llama 3.1+ always opens with a dated system turn.
  if (contains(ctx.source, "Cutting Knowledge Date")) {
    std::string system;
    if (!messages.empty() && isSystem(messages.front())) {
      system = trim(messages.front().content);
      messages = messages.subspan(1);
    }
    out = ctx.bos() + "<|start_header_id|>system<|end_header_id|>\n\n" +
          "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n" + system +
          "<|eot_id|>";
  } else if (!messages.empty()) {
    out = ctx.bos();
  }
  for (const ChatMessage& m : messages) out += turn(m.role, m.content);
  if (ctx.options.addGenerationPrompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

std::string renderMistral(Messages messages, const RenderContext& ctx) {
  // v0.1/v0.2 write "[INST] x [/INST]answer</s>"; v0.3 "[INST] x[/INST] answer</s>".
  const bool spaceBeforeClose = contains(ctx.source, " [/INST]");
  const bool spaceBeforeAnswer =
      contains(ctx.source, "\" \" + message") || contains(ctx.source, "' ' + message");
  const bool systemInLastTurn = contains(ctx.source, "loop.last and system_message");
  std::string out = ctx.bos();
  for (const ChatMessage& m : foldSystemIntoUser(messages, "\n\n", systemInLastTurn)) {
    if (isAssistant(m)) {
      out += (spaceBeforeAnswer ? " " : "") + m.content + ctx.options.eosToken;
    } else {
      out += "[INST] " + m.content + (spaceBeforeClose ? " [/INST]" : "[/INST]");
    }
  }
  return out;
}

std::string renderGemma(Messages messages, const RenderContext& ctx) {
  std::string out = ctx.bos();
  for (const ChatMessage& m : foldSystemIntoUser(messages, "\n\n", false)) {
    const std::string role = isAssistant(m) ? "model" : m.role;
    out += "<start_of_turn>" + role + "\n" + trim(m.content) + "<end_of_turn>\n";
  }
  if (ctx.options.addGenerationPrompt) out += "<start_of_turn>model\n";
  return out;
}

std::string renderPhi3(Messages messages, const RenderContext& ctx) {
  std::string out = ctx.bos();
  // Some Phi-3 templates ignore add_generation_prompt: every user turn opens
  // the assistant's, and system messages are dropped.
  if (!contains(ctx.source, "add_generation_prompt")) {
    for (const ChatMessage& m : messages) {
      if (isAssistant(m)) out += m.content + "<|end|>\n";
      if (m.role == "user") out += "<|user|>\n" + m.content + "<|end|>\n<|assistant|>\n";
    }
    return out;
  }
  for (const ChatMessage& m : messages) out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
  if (ctx.options.addGenerationPrompt) {
    out += "<|assistant|>\n";
  } else if (contains(ctx.source, "eos_token")) {
    out += ctx.options.eosToken;
  }
  return out;
}

std::string renderZephyr(Messages messages, const RenderContext& ctx) {
  std::string out = ctx.bos();
  for (const ChatMessage& m : messages) {
    out += "<|" + m.role + "|>\n" + m.content + ctx.options.eosToken + "\n";
  }
  if (ctx.options.addGenerationPrompt) out += "<|assistant|>\n";
  return out;
}

std::string renderDeepseek(Messages messages, const RenderContext& ctx) {
  std::string out = ctx.bos();
  for (const ChatMessage& m : messages) {
    if (isSystem(m)) {
      out += m.content + "\n\n";
    } else if (isAssistant(m)) {
      out += "Assistant: " + m.content + ctx.options.eosToken;
    } else {
      out += "User: " + m.content + "\n\n";
    }
  }
  if (ctx.options.addGenerationPrompt) out += "Assistant:";
  return out;
}

std::string renderDeepseekCoder(Messages messages, const RenderContext& ctx) {
  std::string out = ctx.bos();
  bool hasSystem = false;
  for (const ChatMessage& m : messages) hasSystem = hasSystem || isSystem(m);
  if (!hasSystem && contains(ctx.source, kDeepseekCoderSystem)) {
    out += std::string(kDeepseekCoderSystem) + "\n";
  }
  for (const ChatMessage& m : messages) {
    if (isSystem(m)) {
      out += m.content;
    } else if (isAssistant(m)) {
      out += "### Response:\n" + m.content + "\n<|EOT|>\n";
    } else {
      out += "### Instruction:\n" + m.content + "\n";
    }
  }
  if (ctx.options.addGenerationPrompt) out += "### Response:";
  return out;
}

std::string renderDeepseek3(Messages messages, const RenderContext& ctx) {
  std::string system;
  for (const ChatMessage& m : messages) {
    if (isSystem(m)) system += system.empty() ? m.content : "\n\n" + m.content;
  }
  std::string out = ctx.bos() + system;
  // R1-style templates drop the reasoning of earlier answers.
  const bool dropsThinking = contains(ctx.source, "</think>");
  for (const ChatMessage& m : messages) {
    if (isAssistant(m)) {
      std::string_view content = m.content;
      const size_t think = content.rfind("</think>");
      if (dropsThinking && think != std::string_view::npos) content.remove_prefix(think + 8);
      out += std::string(kDeepseekAssistant) + std::string(content) + std::string(kDeepseekEos);
    } else if (!isSystem(m)) {
      out += std::string(kDeepseekUser) + m.content;
    }
  }
  if (ctx.options.addGenerationPrompt) {
    out += kDeepseekAssistant;
    if (contains(ctx.source, std::string(kDeepseekAssistant) + "<think>")) out += "<think>\n";
  }
  return out;
}

}  // namespace

std::string renderPlainChat(Messages messages) {
  std::string out;
  for (const ChatMessage& m : messages) out += m.content;
  return out;
}

std::string_view chatFamilyName(ChatFamily family) {
  switch (family) {
    case ChatFamily::kNone:
      return "none";
    case ChatFamily::kUnknown:
      return "unknown";
    case ChatFamily::kChatml:
      return "chatml";
    case ChatFamily::kLlama2:
      return "llama2";
    case ChatFamily::kLlama3:
      return "llama3";
    case ChatFamily::kMistral:
      return "mistral-instruct";
    case ChatFamily::kGemma:
      return "gemma";
    case ChatFamily::kPhi3:
      return "phi-3";
    case ChatFamily::kZephyr:
      return "zephyr";
    case ChatFamily::kDeepseek:
      return "deepseek";
    case ChatFamily::kDeepseekCoder:
      return "deepseek-coder";
    case ChatFamily::kDeepseek3:
      return "deepseek3";
  }
  return "unknown";
}

ChatFamily detectChatFamily(std::string_view source) {
  if (trim(source).empty()) return ChatFamily::kNone;
  if (contains(source, "<|im_start|>")) return ChatFamily::kChatml;
  if (contains(source, "<|start_header_id|>")) return ChatFamily::kLlama3;
  if (contains(source, "<start_of_turn>")) return ChatFamily::kGemma;
  if (contains(source, "[INST]")) {
    return contains(source, "<<SYS>>") ? ChatFamily::kLlama2 : ChatFamily::kMistral;
  }
  if (contains(source, "<|user|>")) {
    return contains(source, "<|end|>") ? ChatFamily::kPhi3 : ChatFamily::kZephyr;
  }
  if (contains(source, kDeepseekUser)) return ChatFamily::kDeepseek3;
  if (contains(source, "### Instruction:")) return ChatFamily::kDeepseekCoder;
  if (contains(source, "User: ") && contains(source, "Assistant:")) return ChatFamily::kDeepseek;
  return ChatFamily::kUnknown;
}

std::string renderChatFormat(ChatFamily family, std::string_view source, Messages messages,
                             const FormatOptions& options) {
  const RenderContext ctx{source, options};
  switch (family) {
    case ChatFamily::kChatml:
      return renderChatml(messages, ctx);
    case ChatFamily::kLlama2:
      return renderLlama2(messages, ctx);
    case ChatFamily::kLlama3:
      return renderLlama3(messages, ctx);
    case ChatFamily::kMistral:
      return renderMistral(messages, ctx);
    case ChatFamily::kGemma:
      return renderGemma(messages, ctx);
    case ChatFamily::kPhi3:
      return renderPhi3(messages, ctx);
    case ChatFamily::kZephyr:
      return renderZephyr(messages, ctx);
    case ChatFamily::kDeepseek:
      return renderDeepseek(messages, ctx);
    case ChatFamily::kDeepseekCoder:
      return renderDeepseekCoder(messages, ctx);
    case ChatFamily::kDeepseek3:
      return renderDeepseek3(messages, ctx);
    case ChatFamily::kUnknown:
    case ChatFamily::kNone:
      return renderPlainChat(messages);
  }
  return renderPlainChat(messages);
}

}  // namespace kvscope::tokenizer
