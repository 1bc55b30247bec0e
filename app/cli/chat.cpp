// `kvscope-cli chat -m MODEL`: a terminal chat using the model's chat template.
// Each turn re-renders the whole conversation; the Session reuses the cached
// prefix, so only the new message is processed. Ctrl-C stops a reply; at the
// prompt, Ctrl-D or /exit quits, /reset starts over, /system TEXT sets the
// system prompt.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <iostream>

#include <fmt/format.h>

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
  if (!a.system.empty()) messages.push_back({"system", a.system});
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
    fmt::print("\n> ");
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
    auto prompt = s.renderChat(messages);
    if (!prompt.ok()) {
      fmt::print(stderr, "error: {}\n", prompt.error().message);
      if (prompt.error().code == ErrorCode::kOutOfMemory || !chooseRenderer(s)) {
        messages.pop_back();
        continue;
      }
      prompt = s.renderChat(messages);
      if (!prompt.ok()) {
        fmt::print(stderr, "error: {}\n", prompt.error().message);
        messages.pop_back();
        continue;
      }
    }
    if (!prompt->warning.empty() && !warned) {
      fmt::print(stderr, "warning: {}\n", prompt->warning);
      warned = true;
    }
    // The whole conversation stays here; what does not fit is left out of this
    // turn's prompt (again at every later turn).
    const uint32_t limit = s.backend().contextLimit();
    auto fit = runtime::fitChat(s, messages, overflow,
                                runtime::replyReserve(overflow, a.maxTokens, limit));
    if (!fit.ok()) {
      fmt::print(stderr, "error: {}\n", fit.error().message);
      messages.pop_back();
      continue;
    }
    if (!fit->dropped.empty()) {
      fmt::print(stderr,
                 "[context overflow ({}): {} earlier messages left out; prefilling {} "
                 "tokens]\n",
                 a.overflow, fit->dropped.size(), fit->prefill);
    }
    Stream stream;
    g_active = &s;
    auto r = s.generate(fit->tokens, go, &stream);
    g_active = nullptr;
    if (!r.ok()) {
      fmt::print(stderr, "\nerror: {}\n", r.error().message);
      messages.pop_back();  // the conversation stays as it was
      continue;
    }
    messages.push_back({"assistant", r->text});
    if (const kv::AutoPlan* plan = s.autoPlan(); plan && !autoShown) {
      fmt::print(stderr, "\n{}", runtime::describeAutoPlan(*plan));
      autoShown = true;
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
  cmd->callback([&global, &exitCode] { exitCode = runChat(args, global); });
}

}  // namespace kvscope::cli
