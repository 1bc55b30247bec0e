#pragma once
// Chat templates: turn a conversation into the prompt text a model was trained
// on, by rendering the model's own Jinja template (tokenizer.chat_template)
// exactly as Hugging Face's apply_chat_template renders it (engine/jinja).
//
// The template sees: messages, add_generation_prompt, bos_token, eos_token,
// tools (none, or the request's tool list), documents (none), and
// enable_thinking when the user set it (templates that read it default it
// themselves otherwise). strftime_now() formats the local time.
//
// A template that cannot render a conversation — it does not parse, or it
// raises (e.g. "System role not supported") — is an error that names the model
// and the template line. The caller then offers the user the other renderers
// (ChatRenderer): kvscope's built-in format for the template's family
// (chat_formats.h) or plain completion. There is no silent fallback.
//
// No template: plain completion, with a warning when the vocabulary has chat
// turn tokens (an instruct model whose file lost its template).
//
// Rendered text contains special-token strings ("<|im_start|>", "<s>");
// encodeChatPrompt() tokenizes it the way llama.cpp does.

#include <ctime>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/chat_formats.h"
#include "tokenizer/tokenizer.h"

namespace kvscope::jinja {
class Template;
}

namespace kvscope::tokenizer {

enum class ChatRenderer {
  kTemplate,  // the model's Jinja template (the default)
  kBuiltin,   // kvscope's format for the template's family
  kPlain,     // plain completion
};
// "template", "builtin", "plain"; parseChatRenderer accepts the same names.
std::string_view chatRendererName(ChatRenderer renderer);
std::optional<ChatRenderer> parseChatRenderer(std::string_view name);

struct ChatOptions {
  bool addGenerationPrompt = true;
  std::string bosToken = "<s>";  // the model's BOS/EOS texts (Tokenizer::piece with render)
  std::string eosToken = "</s>";
  ChatRenderer renderer = ChatRenderer::kTemplate;
  std::optional<bool> enableThinking;  // unset: the template's own default
  std::string toolsJson;               // a JSON array of tools; empty: none
  std::optional<std::tm> now;          // what strftime_now() formats; unset: local time
};

struct ChatPrompt {
  std::string text;
  ChatRenderer renderer = ChatRenderer::kTemplate;  // what rendered it
  bool plain = false;   // plain completion: special tokens are not parsed from it
  std::string warning;  // e.g. a chat model without a template
};

class ChatTemplate {
 public:
  // `modelName` names the model in error messages.
  explicit ChatTemplate(std::string source, std::string modelName = {});

  const std::string& source() const { return m_source; }
  bool empty() const { return m_template == nullptr && !m_parseError; }
  // The family the built-in renderer would use.
  ChatFamily family() const { return m_family; }
  std::string_view familyName() const { return chatFamilyName(m_family); }
  // Whether the template reads enable_thinking (the "think" setting applies).
  bool readsThinking() const;
  // The parse failure, when the template does not parse.
  const std::optional<Error>& parseError() const { return m_parseError; }

  Expected<ChatPrompt> render(std::span<const ChatMessage> messages,
                              const ChatOptions& options) const;
  // Messages as OpenAI-style JSON objects, passed to the template as they are
  // (tool_calls, content lists, …). The built-in and plain renderers read each
  // message's role and string content; other content is an error for them.
  Expected<ChatPrompt> render(const nlohmann::ordered_json& messages,
                              const ChatOptions& options) const;

 private:
  std::string m_source;
  std::string m_modelName;
  ChatFamily m_family;
  std::shared_ptr<const jinja::Template> m_template;
  std::optional<Error> m_parseError;
};

// A warning for a vocabulary that has chat turn tokens (<|im_start|>,
// <|start_header_id|>, [INST], …) but no chat template; empty otherwise.
std::string missingTemplateWarning(const Tokenizer& tokenizer);

// Tokenizes a rendered prompt as llama.cpp does: special tokens are parsed
// (not for plain completion, whose text is the user's own), BOS is added as the
// vocabulary asks, and a BOS the template already wrote is not doubled.
std::vector<TokenId> encodeChatPrompt(const Tokenizer& tokenizer, const ChatPrompt& prompt);

}  // namespace kvscope::tokenizer
