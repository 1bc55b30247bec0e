// `kvscope-cli chat -m MODEL`: a terminal chat using the model's chat template.
// Each turn re-renders the whole conversation; the Session reuses the cached
// prefix, so only the new message is processed. Ctrl-C stops a reply; at the
// prompt, Ctrl-D or /exit quits, /reset starts over, /system TEXT sets the
// system prompt. Turns are read from standard input, a terminal or not.
//
// --session FILE keeps the chat across runs: FILE holds the messages (JSON,
// written atomically after every turn) and FILE.kvcache the compressed KV
// cache (runtime/kv_file.h), so a restored chat continues without prefill. A
// cache that does not fit (another model or policy, a damaged file) is set
// aside with a message and the next turn prefills the conversation.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/text_file.h"

#include "cli/model_options.h"
#include "runtime/context_overflow.h"
#include "runtime/kv_auto.h"

namespace kvscope::cli {
namespace {

runtime::Session* g_active = nullptr;  // the session a Ctrl-C should stop

void onInterrupt(int) {
  if (g_active) g_active->requestStop();  // an atomic store: safe in a signal handler
}

// The model's template failed on this conversation: the user chooses what
// renders it instead (the built-in format of its family, plain completion) or
// drops the message. Returns false to drop it.
bool chooseRenderer(runtime::Session& s) {
  const tokenizer::ChatTemplate& t = s.chatTemplate();
  const bool builtin =
      t.family() != tokenizer::ChatFamily::kNone && t.family() != tokenizer::ChatFamily::kUnknown;
  if (builtin) {
    fmt::print(stderr,
               "Render with kvscope's built-in '{}' format [b], as plain completion [p], "
               "or drop this message [Enter]? ",
               t.familyName());
  } else {
    fmt::print(stderr, "Render as plain completion [p], or drop this message [Enter]? ");
  }
  std::string answer;
  if (!std::getline(std::cin, answer)) return false;
  runtime::Session::ChatSettings settings = s.chatSettings();
  if (builtin && answer == "b") {
    settings.renderer = tokenizer::ChatRenderer::kBuiltin;
  } else if (answer == "p") {
    settings.renderer = tokenizer::ChatRenderer::kPlain;
  } else {
    return false;
  }
  s.setChatSettings(settings);
  return true;
}

// The messages of a --session file; kNotFound when it does not exist yet.
Expected<std::vector<tokenizer::ChatMessage>> loadMessages(const std::filesystem::path& path) {
  KVS_ASSIGN_OR_RETURN(const std::string text, readTextFile(path));
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (j.at("format").get<std::string>() != "kvscope-chat")
      return makeError(ErrorCode::kBadFile, "{} is not a kvscope chat session", path.string());
    std::vector<tokenizer::ChatMessage> messages;
    for (const nlohmann::json& m : j.at("messages"))
      messages.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
    return messages;
  } catch (const nlohmann::json::exception& e) {
    return makeError(ErrorCode::kBadFile, "{} is not a readable chat session: {}", path.string(),
                     e.what());
  }
}

Status saveMessages(const std::filesystem::path& path,
                    const std::vector<tokenizer::ChatMessage>& messages) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
  const nlohmann::json j = {{"format", "kvscope-chat"}, {"version", 1}, {"messages", list}};
  return writeFileAtomically(path, j.dump(1));
}

std::filesystem::path cachePath(const std::filesystem::path& session) {
  return session.string() + ".kvcache";
}

class Stream : public runtime::Observer {
 public:
  void onToken(std::string_view text, int32_t) override {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }
};

struct ChatArgs {
  ModelOptions model;
  ChatTemplateOptions chat;
  std::string system;
  uint32_t maxTokens = 512;
  std::string overflow = "stop";
  std::filesystem::path session;  // empty: nothing kept
};

int runChat(const ChatArgs& a, const GlobalOptions& global) {
  auto loaded = loadSession(a.model, global);
  if (!loaded.ok()) {
    fmt::print(stderr, "error: {}\n", loaded.error().message);
    return 1;
  }
  runtime::Session& s = **loaded;
  if (const Status applied = applyChatTemplateOptions(a.chat, s); !applied.ok()) {
    fmt::print(stderr, "error: {}\n", applied.error().message);
    return 1;
  }
  const runtime::ContextOverflow overflow = runtime::parseContextOverflow(a.overflow).value();
  std::vector<tokenizer::ChatMessage> messages;
  if (!a.session.empty()) {
    auto saved = loadMessages(a.session);
    if (saved.ok()) {
      messages = std::move(*saved);
      const Status restored = s.restoreCache(cachePath(a.session));
      if (restored.ok()) {
        fmt::print(stderr, "[{}: {} messages, {} tokens restored from the saved KV cache]\n",
                   a.session.string(), messages.size(), s.history().size());
      } else if (restored.error().code == ErrorCode::kIo &&
                 !std::filesystem::exists(cachePath(a.session))) {
        fmt::print(stderr, "[{}: {} messages; the next turn prefills them]\n", a.session.string(),
                   messages.size());
      } else {
        fmt::print(stderr,
                   "[{}: {} messages; the saved KV cache was not used ({}); the next turn "
                   "prefills them]\n",
                   a.session.string(), messages.size(), restored.error().message);
      }
    } else if (saved.error().code != ErrorCode::kNotFound) {
      // Never overwrite what could not be read.
      fmt::print(stderr, "error: {}\n", saved.error().message);
      return 1;
    }
  }
  const bool hasSystem = std::any_of(messages.begin(), messages.end(),
                                     [](const auto& m) { return m.role == "system"; });
  if (!a.system.empty() && !hasSystem) messages.insert(messages.begin(), {"system", a.system});
  // After every turn: the messages, then the cache they led to.
  const auto keep = [&] {
    if (a.session.empty()) return;
    Status st = saveMessages(a.session, messages);
    if (st.ok()) st = s.saveCache(cachePath(a.session));
    if (!st.ok())
      fmt::print(stderr, "warning: the session was not saved: {}\n", st.error().message);
  };
  const bool terminal = ::isatty(STDIN_FILENO) != 0;
  runtime::GenerateOptions go;
  go.maxTokens = a.maxTokens;
  go.sampler = a.model.sampler;
  if (a.model.seedSet) go.sampler.seed = a.model.seed;
  std::signal(SIGINT, onInterrupt);
  bool warned = false;
  bool autoShown = false;  // an auto policy's choice, printed once it is made
  fmt::print(
      stderr,
      "kvscope chat: {} ({} layers). /exit quits, /reset starts over, Ctrl-C stops a reply.\n",
      s.config().name.empty() ? s.config().architecture : s.config().name, s.config().nLayer);
  std::string line;
  while (true) {
    if (terminal) fmt::print("\n> ");
    std::fflush(stdout);
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line == "/reset") {
      messages.erase(std::remove_if(messages.begin(), messages.end(),
                                    [](auto& m) { return m.role != "system"; }),
                     messages.end());
      continue;
    }
    if (line.rfind("/system ", 0) == 0) {
      messages.erase(std::remove_if(messages.begin(), messages.end(),
                                    [](auto& m) { return m.role == "system"; }),
                     messages.end());
      messages.insert(messages.begin(), {"system", line.substr(8)});
      continue;
    }
    if (line.empty()) continue;
    messages.push_back({"user", line});
    // The whole conversation stays here; what does not fit is left out of this
    // turn's prompt (again at every later turn).
    const runtime::ChatTurnRequest request{.messages = messages, .overflow = overflow, .options = go};
    runtime::TurnStage failedAt = runtime::TurnStage::kContext;
    auto turn = runtime::prepareChatTurn(s, request, &failedAt);
    if (!turn.ok() && failedAt == runtime::TurnStage::kTemplate &&
        turn.error().code != ErrorCode::kOutOfMemory) {
      // The template refused the conversation: another renderer, if the user picks one.
      fmt::print(stderr, "error: {}\n", turn.error().message);
      if (!chooseRenderer(s)) {
        messages.pop_back();
        continue;
      }
      turn = runtime::prepareChatTurn(s, request);
    }
    if (!turn.ok()) {
      fmt::print(stderr, "error: {}\n", turn.error().message);
      messages.pop_back();
      continue;
    }
    if (const std::string& warning = turn->fit.prompt.warning; !warning.empty() && !warned) {
      fmt::print(stderr, "warning: {}\n", warning);
      warned = true;
    }
    if (!turn->fit.dropped.empty()) {
      fmt::print(stderr,
                 "[context overflow ({}): {} earlier messages left out; prefilling {} "
                 "tokens]\n",
                 a.overflow, turn->fit.dropped.size(), turn->fit.prefill);
    }
    Stream stream;
    g_active = &s;
    auto r = s.generate(turn->fit.tokens, turn->options, &stream);
    g_active = nullptr;
    if (!r.ok()) {
      fmt::print(stderr, "\nerror: {}\n", r.error().message);
      messages.pop_back();  // the conversation stays as it was
      continue;
    }
    messages.push_back({"assistant", r->text});
    keep();
    if (const kv::AutoPlan* plan = s.autoPlan(); plan && !autoShown) {
      fmt::print(stderr, "\n{}", runtime::describeAutoPlan(*plan));
      autoShown = true;
    }
    if (r->stats.contextShifts > 0) {
      fmt::print(stderr, "\n[context shifted {} times: {} oldest tokens dropped]", r->stats.contextShifts,
                 r->stats.shiftedTokens);
    }
    fmt::print(stderr, "\n[{} tokens, {:.1f} tok/s{}]\n", r->tokens.size(),
               r->stats.decodeTokensPerSecond(),
               r->stop == runtime::StopReason::kContextFull
                   ? overflow == runtime::ContextOverflow::kStop
                         ? "; the context is full: /reset, or --context-overflow "
                           "truncate-middle|rolling to drop old turns"
                         : "; the context is full: the next turn drops old turns"
                   : "");
  }
  return 0;
}

}  // namespace

void registerChat(CLI::App& app, const GlobalOptions& global, int& exitCode) {
  static ChatArgs args;
  auto* cmd =
      app.add_subcommand("chat", "Chat with a model in the terminal, using its chat template");
  addModelOptions(cmd, args.model);
  addChatTemplateOptions(cmd, args.chat);
  cmd->add_option("--system", args.system, "System prompt");
  cmd->add_option("-n,--n-predict", args.maxTokens, "Most tokens per reply")
      ->default_val(args.maxTokens);
  addContextOverflowOption(cmd, args.overflow);
  cmd->add_option("--session", args.session,
                  "Keep the chat in FILE (messages) and FILE.kvcache (the compressed KV cache): "
                  "created, or restored without prefill");
  cmd->callback([&global, &exitCode] { exitCode = runChat(args, global); });
}

}  // namespace kvscope::cli
