// `kvscope-cli generate`: complete a prompt, streaming text to stdout, or
// print one JSON object with the tokens, text and speeds (--json).
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/auto_plan_json.h"
#include "cli/model_options.h"
#include "runtime/context_overflow.h"
#include "runtime/kv_auto.h"

namespace kvscope::cli {
namespace {

class StreamToStdout : public runtime::Observer {
 public:
  void onToken(std::string_view text, int32_t) override {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }
};

struct GenerateArgs {
  ModelOptions model;
  std::string prompt;
  uint32_t tokens = 128;
  bool json = false;
  std::string overflow = "stop";
};

int runGenerate(const GenerateArgs& a, const GlobalOptions& global) {
  auto session = loadSession(a.model, global);
  if (!session.ok()) {
    fmt::print(stderr, "error: {}\n", session.error().message);
    return 1;
  }
  auto& s = **session;
  const auto overflow = runtime::parseContextOverflow(a.overflow).value();
  const uint32_t limit = s.backend().contextLimit();
  uint32_t dropped = 0;
  const auto prompt = runtime::fitPrompt(s.tokenizeCompletion(a.prompt), overflow, limit,
                                         runtime::replyReserve(overflow, a.tokens, limit),
                                         s.tokenizer().vocab().bos, dropped);
  if (!prompt.ok()) {
    fmt::print(stderr, "error: {}\n", prompt.error().message);
    return 1;
  }
  if (dropped > 0) {
    fmt::print(stderr, "[context overflow ({}): {} prompt tokens dropped]\n", a.overflow, dropped);
  }
  runtime::GenerateOptions go;
  go.maxTokens = a.tokens;
  go.sampler = a.model.sampler;
  if (a.model.seedSet) go.sampler.seed = a.model.seed;
  go.shift = runtime::promptShift(*prompt, overflow, s.tokenizer().vocab().bos, limit);
  StreamToStdout stream;
  if (!a.json) std::fputs(a.prompt.c_str(), stdout);
  auto r = s.generate(*prompt, go, a.json ? nullptr : &stream);
  if (!r.ok()) {
    fmt::print(stderr, "{}error: {}\n", a.json ? "" : "\n", r.error().message);
    return 1;
  }
  const auto& st = r->stats;
  if (a.json) {
    nlohmann::json out = {{"prompt_tokens", *prompt},
                          {"prompt_tokens_dropped", dropped},
                          {"tokens", r->tokens},
                          {"text", r->text},
                          {"stop", runtime::stopReasonName(r->stop)},
                          {"seed", r->seed},
                          {"prefill_tps", st.prefillTokensPerSecond()},
                          {"decode_tps", st.decodeTokensPerSecond()},
                          {"context_shifts", st.contextShifts},
                          {"shifted_tokens", st.shiftedTokens},
                          {"kv_policy", s.kvPolicy().toString()}};
    if (const kv::AutoPlan* plan = s.autoPlan()) out["auto"] = runtime::autoPlanJson(*plan);
    fmt::print("{}\n", out.dump(2));
  } else {
    fmt::print(stderr,
               "\n[{} prompt tokens, {:.1f} tok/s prefill; {} generated, {:.1f} tok/s decode; "
               "stop: {}; seed {}]\n",
               prompt->size(), st.prefillTokensPerSecond(), r->tokens.size(),
               st.decodeTokensPerSecond(), runtime::stopReasonName(r->stop), r->seed);
    if (st.contextShifts > 0) {
      fmt::print(stderr, "[context shifted {} times ({}): {} oldest tokens dropped, {:.0f} ms]\n",
                 st.contextShifts, a.overflow, st.shiftedTokens, st.shiftMs);
    }
    if (const kv::AutoPlan* plan = s.autoPlan())
      fmt::print(stderr, "{}", runtime::describeAutoPlan(*plan));
  }
  return 0;
}

}  // namespace

void registerGenerate(CLI::App& app, const GlobalOptions& global, int& exitCode) {
  static GenerateArgs args;
  auto* cmd = app.add_subcommand("generate", "Complete a prompt with a model");
  addModelOptions(cmd, args.model);
  cmd->add_option("-p,--prompt", args.prompt, "Prompt text")->required();
  cmd->add_option("-n,--n-predict", args.tokens, "Tokens to generate")->default_val(args.tokens);
  cmd->add_flag("--json", args.json, "Print one JSON object instead of streaming text");
  addContextOverflowOption(cmd, args.overflow);
  cmd->callback([&global, &exitCode] { exitCode = runGenerate(args, global); });
}

}  // namespace kvscope::cli
