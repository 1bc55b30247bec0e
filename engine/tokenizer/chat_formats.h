#pragma once
// kvscope's built-in chat formats: a hand-written renderer per template family,
// recognised by distinctive substrings of the model's template source.
//
// These are not how kvscope renders a model's template — the model's own Jinja
// template is (chat_template.h). They are what a user may choose instead when
// that template cannot render a conversation (it fails to parse or raises), and
// the family name shown in the inspector. Details a family's templates express
// in Jinja are read from the source where they vary between versions: whether
// BOS is emitted (the template mentions bos_token) and ChatML's default system
// prompt.
//
// Plain completion: message contents concatenated with nothing between them, so
// a reply streamed after the prompt re-renders to the same text next turn.

#include <span>
#include <string>
#include <string_view>

namespace kvscope::tokenizer {

enum class ChatFamily {
  kNone,           // the model has no template
  kUnknown,        // a template that matches no built-in family
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
  std::string role;  // "system", "user", "assistant" (a template may accept others, e.g. "tool")
  std::string content;
};

struct FormatOptions {
  bool addGenerationPrompt = true;  // end with the assistant turn's opening
  std::string bosToken = "<s>";     // the model's BOS/EOS texts
  std::string eosToken = "</s>";
};

// The family's format; kNone and kUnknown render plain completion.
std::string renderChatFormat(ChatFamily family, std::string_view templateSource,
                             std::span<const ChatMessage> messages, const FormatOptions& options);
std::string renderPlainChat(std::span<const ChatMessage> messages);

}  // namespace kvscope::tokenizer
