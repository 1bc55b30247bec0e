#pragma once
// Chat templates: turn a conversation into the prompt text a model was trained
// on.
//
// A model ships its template as Jinja source (tokenizer.chat_template). Rather
// than interpret Jinja, kvscope recognises the template's family by distinctive
// substrings and renders that family's published format in C++. Why: the real
// templates lean on a wide slice of Jinja (namespaces, loops with loop.*,
// filters, string methods, raise_exception) and vary in whitespace handling; a
// Jinja subset small enough to review would still misrender some of them
// silently, while a per-family renderer is a few exact lines each and its
// output is pinned by tests. Details a family's templates express in Jinja are
// read from the source where they vary between versions: whether BOS is
// emitted (the template mentions bos_token) and ChatML's default system prompt.
//
// No template: plain completion — message contents concatenated with nothing
// between them, so a reply streamed after the prompt re-renders to the same
// text next turn (the KV cache prefix stays valid). An unrecognised template
// falls back the same way and says so in ChatPrompt::warning for the UI.
//
// Rendered text contains special-token strings (e.g. "<|im_start|>", "<s>");
// encodeChatPrompt() tokenizes it the way llama.cpp does.

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace kvscope::tokenizer {

enum class ChatFamily {
  kNone,           // the model has no template: plain completion
  kUnknown,        // a template kvscope does not recognise: plain completion + warning
  kChatml,         // <|im_start|>role ... <|im_end|> (Qwen, many fine-tunes)
  kLlama2,         // [INST] <<SYS>> ... [/INST]
  kLlama3,         // <|start_header_id|>role<|end_header_id|>
  kMistral,        // [INST] ... [/INST] without <<SYS>>
  kGemma,          // <start_of_turn>user / model
  kPhi3,           // <|user|> ... <|end|>
  kZephyr,         // <|user|> ... </s>
  kDeepseek,       // DeepSeek LLM chat: "User: ...\n\nAssistant: ..."
  kDeepseekCoder,  // "### Instruction:" / "### Response:"
  kDeepseek3,      // <｜User｜> ... <｜Assistant｜>
};

// "chatml", "llama2", ..., "none", "unknown" (shown by kvscope-cli inspect).
std::string_view chatFamilyName(ChatFamily family);
ChatFamily detectChatFamily(std::string_view templateSource);

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

struct ChatOptions {
  bool addGenerationPrompt = true;  // end with the assistant turn's opening
  std::string bosToken = "<s>";     // the model's BOS/EOS texts (Tokenizer::piece with render)
  std::string eosToken = "</s>";
};

struct ChatPrompt {
  std::string text;
  ChatFamily family = ChatFamily::kNone;
  std::string warning;  // non-empty when the template was not understood
};

class ChatTemplate {
 public:
  explicit ChatTemplate(std::string source);

  ChatFamily family() const { return m_family; }
  std::string_view familyName() const { return chatFamilyName(m_family); }
  const std::string& source() const { return m_source; }

  ChatPrompt render(std::span<const ChatMessage> messages, const ChatOptions& options) const;

 private:
  std::string m_source;
  ChatFamily m_family;
};

// Tokenizes a rendered prompt as llama.cpp does: special tokens are parsed
// (not for plain completion, whose text is the user's own), BOS is added as the
// vocabulary asks, and a BOS the template already wrote is not doubled.
std::vector<TokenId> encodeChatPrompt(const Tokenizer& tokenizer, const ChatPrompt& prompt);

}  // namespace kvscope::tokenizer
