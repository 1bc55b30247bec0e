#include "tokenizer/chat_template.h"

#include <nlohmann/json.hpp>

#include "core/json_depth.h"
#include "jinja/template.h"

namespace kvscope::tokenizer {
namespace {

std::string modelLabel(const std::string& name) {
  return name.empty() ? std::string("this model") : "'" + name + "'";
}

}  // namespace

std::string_view chatRendererName(ChatRenderer renderer) {
  switch (renderer) {
    case ChatRenderer::kTemplate:
      return "template";
    case ChatRenderer::kBuiltin:
      return "builtin";
    case ChatRenderer::kPlain:
      return "plain";
  }
  return "template";
}

std::optional<ChatRenderer> parseChatRenderer(std::string_view name) {
  for (const ChatRenderer r :
       {ChatRenderer::kTemplate, ChatRenderer::kBuiltin, ChatRenderer::kPlain}) {
    if (chatRendererName(r) == name) return r;
  }
  return std::nullopt;
}

ChatTemplate::ChatTemplate(std::string source, std::string modelName)
    : m_source(std::move(source)),
      m_modelName(std::move(modelName)),
      m_family(detectChatFamily(m_source)) {
  if (m_source.find_first_not_of(" \t\n\r\v\f") == std::string::npos) return;  // no template
  auto parsed = jinja::Template::parse(m_source);
  if (!parsed.ok()) {
    m_parseError = makeError(ErrorCode::kBadFile, "the chat template of {} does not parse: {}",
                             modelLabel(m_modelName), parsed.error().message);
    return;
  }
  m_template = std::make_shared<const jinja::Template>(std::move(parsed).value());
}

bool ChatTemplate::readsThinking() const {
  return m_source.find("enable_thinking") != std::string::npos;
}

Expected<ChatPrompt> ChatTemplate::render(std::span<const ChatMessage> messages,
                                          const ChatOptions& options) const {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
  return render(list, options);
}

Expected<ChatPrompt> ChatTemplate::render(const nlohmann::ordered_json& messages,
                                          const ChatOptions& options) const {
  if (!messages.is_array())
    return makeError(ErrorCode::kInvalidArgument, "messages must be a list");
  ChatPrompt prompt;
  prompt.renderer = options.renderer;
  const bool noTemplate = m_template == nullptr && !m_parseError;
  if (options.renderer != ChatRenderer::kTemplate || noTemplate) {
    std::vector<ChatMessage> simple;
    for (const auto& m : messages) {
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
          !m.contains("content") || !m["content"].is_string()) {
        return makeError(ErrorCode::kInvalidArgument,
                         "without the model's template, each message needs a string role and "
                         "string content");
      }
      simple.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    }
    if (options.renderer == ChatRenderer::kBuiltin) {
      if (m_family == ChatFamily::kNone || m_family == ChatFamily::kUnknown) {
        return makeError(ErrorCode::kInvalidArgument,
                         "kvscope has no built-in chat format for the template of {}; use its "
                         "own template or plain completion",
                         modelLabel(m_modelName));
      }
      prompt.text =
          renderChatFormat(m_family, m_source, simple,
                           {options.addGenerationPrompt, options.bosToken, options.eosToken});
      return prompt;
    }
    prompt.text = renderPlainChat(simple);
    prompt.plain = true;
    return prompt;
  }
  if (m_parseError) return *m_parseError;

  jinja::Object vars;
  jinja::Value tools = jinja::Value::none();
  if (!options.toolsJson.empty()) {
    if (jsonNestingDepth(options.toolsJson) > kMaxJsonDepth) {
      return makeError(ErrorCode::kInvalidArgument, "tools nest deeper than {} levels",
                       kMaxJsonDepth);
    }
    const auto json = nlohmann::ordered_json::parse(options.toolsJson, nullptr, false);
    if (json.is_discarded() || !json.is_array()) {
      return makeError(ErrorCode::kInvalidArgument, "tools must be a JSON array");
    }
    try {
      tools = jinja::Value::fromJson(json);
    } catch (const jinja::TemplateError& e) {
      return makeError(ErrorCode::kInvalidArgument, "tools: {}", e.message);
    }
  }
  try {
    vars.set("messages", jinja::Value::fromJson(messages));
  } catch (const jinja::TemplateError& e) {
    return makeError(ErrorCode::kInvalidArgument, "messages: {}", e.message);
  }
  vars.set("add_generation_prompt", options.addGenerationPrompt);
  vars.set("bos_token", options.bosToken);
  vars.set("eos_token", options.eosToken);
  vars.set("tools", tools);
  vars.set("documents", jinja::Value::none());
  if (options.enableThinking) vars.set("enable_thinking", *options.enableThinking);

  auto text = m_template->render(vars, options.now ? *options.now : jinja::localTimeNow());
  if (!text.ok()) {
    return makeError(text.error().code == ErrorCode::kOutOfMemory ? ErrorCode::kOutOfMemory
                                                                  : ErrorCode::kInvalidArgument,
                     "the chat template of {} failed on this conversation: {}",
                     modelLabel(m_modelName), text.error().message);
  }
  prompt.text = std::move(text).value();
  return prompt;
}

std::string missingTemplateWarning(const Tokenizer& tokenizer) {
  // Turn markers of the common chat formats: a vocabulary with one of these was
  // trained for chat, so plain completion will not follow the conversation.
  for (const std::string_view marker :
       {"<|im_start|>", "<|start_header_id|>", "<start_of_turn>", "[INST]", "<|user|>",
        "<｜User｜>", "<|eot_id|>", "<|im_end|>"}) {
    const auto id = tokenizer.find(marker);
    if (id && tokenizer.type(*id) != TokenType::kNormal) {
      return "This model has chat turn tokens (" + std::string(marker) +
             ") but no chat template, so messages are sent as plain text and replies may not "
             "follow the conversation. Use a model file that includes its template, or give one "
             "(--chat-template FILE).";
    }
  }
  return {};
}

std::vector<TokenId> encodeChatPrompt(const Tokenizer& tokenizer, const ChatPrompt& prompt) {
  std::string_view text = prompt.text;
  const Vocab& vocab = tokenizer.vocab();
  const std::string_view bos = tokenizer.piece(vocab.bos, /*renderSpecial=*/true);
  if (!prompt.plain && vocab.addBos && !bos.empty() && text.starts_with(bos))
    text.remove_prefix(bos.size());
  return tokenizer.encode(text, {.addSpecial = true, .parseSpecial = !prompt.plain});
}

}  // namespace kvscope::tokenizer
