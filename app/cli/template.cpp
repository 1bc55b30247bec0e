// `kvscope-cli template`: prints the prompt a chat template renders for a
// conversation, exactly (no newline added), as the model would receive it.
//
//   kvscope-cli template -m MODEL --messages chat.json
//   kvscope-cli template --template chatml.jinja --messages chat.json --bos "<s>"
//
// chat.json is a list of OpenAI-style messages, or {"messages": […],
// "tools": […]}. --bos/--eos set bos_token/eos_token (the model's own by
// default; empty without a model).
#include <cstdio>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/text_file.h"
#include "model/model_file.h"
#include "model/model_tokenizer.h"
#include "tokenizer/chat_template.h"

namespace kvscope::cli {
namespace {

struct TemplateArgs {
  std::string model;
  std::string templateFile;
  std::string messagesFile;
  bool noGenerationPrompt = false;
  std::optional<std::string> bos;
  std::optional<std::string> eos;
  std::string think;
};

struct Conversation {
  nlohmann::ordered_json messages;
  std::string toolsJson;  // empty: none
};

Expected<Conversation> readConversation(const std::string& path) {
  KVS_ASSIGN_OR_RETURN(const std::string text, readTextFile(path));
  const auto json = nlohmann::ordered_json::parse(text, nullptr, false);
  if (json.is_discarded())
    return makeError(ErrorCode::kInvalidArgument, "'{}' is not valid JSON", path);
  Conversation c;
  if (json.is_array()) {
    c.messages = json;
  } else if (json.is_object() && json.contains("messages") && json["messages"].is_array()) {
    c.messages = json["messages"];
    if (json.contains("tools") && !json["tools"].is_null()) {
      if (!json["tools"].is_array())
        return makeError(ErrorCode::kInvalidArgument, "'tools' in '{}' must be a list", path);
      c.toolsJson = json["tools"].dump();
    }
  } else {
    return makeError(ErrorCode::kInvalidArgument,
                     "'{}' must hold a list of messages or {{\"messages\": [...]}}", path);
  }
  for (const auto& m : c.messages) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return makeError(ErrorCode::kInvalidArgument, "every message in '{}' needs a string \"role\"",
                       path);
    }
  }
  return c;
}

Status runTemplate(const TemplateArgs& a) {
  if (a.model.empty() && a.templateFile.empty())
    return makeError(ErrorCode::kInvalidArgument, "give -m MODEL or --template FILE");
  KVS_ASSIGN_OR_RETURN(const Conversation conversation, readConversation(a.messagesFile));
  tokenizer::ChatOptions options;
  options.bosToken.clear();
  options.eosToken.clear();
  std::string source;
  std::string name;
  if (!a.model.empty()) {
    KVS_ASSIGN_OR_RETURN(auto model, model::ModelFile::open(a.model));
    KVS_ASSIGN_OR_RETURN(auto tok, model::loadTokenizer(*model));
    const tokenizer::Vocab& v = tok.vocab();
    if (v.bos != tokenizer::kNoToken) options.bosToken = std::string(tok.piece(v.bos, true));
    if (v.eos != tokenizer::kNoToken) options.eosToken = std::string(tok.piece(v.eos, true));
    source = v.chatTemplate;
    name = model->path().filename().string();
    if (source.empty() && a.templateFile.empty()) {
      return makeError(ErrorCode::kInvalidArgument,
                       "'{}' has no chat template; give one with --template FILE", name);
    }
  }
  if (!a.templateFile.empty()) {
    KVS_ASSIGN_OR_RETURN(source, readTextFile(a.templateFile));
    name = std::filesystem::path(a.templateFile).filename().string();
  }
  if (a.bos) options.bosToken = *a.bos;
  if (a.eos) options.eosToken = *a.eos;
  options.addGenerationPrompt = !a.noGenerationPrompt;
  if (!a.think.empty()) options.enableThinking = a.think == "on";
  options.toolsJson = conversation.toolsJson;
  const tokenizer::ChatTemplate chat(std::move(source), name);
  KVS_ASSIGN_OR_RETURN(const tokenizer::ChatPrompt prompt,
                       chat.render(conversation.messages, options));
  std::fwrite(prompt.text.data(), 1, prompt.text.size(), stdout);
  std::fflush(stdout);
  return okStatus();
}

}  // namespace

void registerTemplate(CLI::App& app, const GlobalOptions&, int& exitCode) {
  static TemplateArgs args;
  auto* cmd = app.add_subcommand(
      "template", "Print the prompt a chat template renders for a conversation, exactly");
  cmd->add_option("-m,--model", args.model, "Use this model's template and BOS/EOS");
  cmd->add_option("--template", args.templateFile,
                  "A Jinja template file (instead of the model's)");
  cmd->add_option("--messages", args.messagesFile,
                  "JSON: a list of messages, or {\"messages\": [...], \"tools\": [...]}")
      ->required();
  cmd->add_flag("--no-generation-prompt", args.noGenerationPrompt,
                "Do not open the assistant's turn at the end");
  cmd->add_option("--bos", args.bos, "bos_token (default: the model's; empty without one)");
  cmd->add_option("--eos", args.eos, "eos_token (default: the model's; empty without one)");
  cmd->add_option("--think", args.think, "enable_thinking for templates that read it")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->callback([&exitCode] {
    const Status s = runTemplate(args);
    if (!s.ok()) {
      fmt::print(stderr, "error: {}\n", s.error().message);
      exitCode = 1;
    }
  });
}

}  // namespace kvscope::cli
