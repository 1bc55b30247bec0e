// `kvscope-cli dump -m MODEL -p TEXT --tensor NAME`: prefill the prompt and
// print one intermediate of the model description (model/forward_ops.h), as
// llama.cpp's eval-callback prints its graph's tensors, so a model can be
// diffed against llama.cpp op by op. Names: "inp_embd", "blk.N.attn_norm",
// "blk.N.Qcur_rope", "blk.N.kqv_out", "blk.N.ffn_inp", "blk.N.l_out",
// "result_norm", "result_output" …; `--list` prints them all.
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/model_options.h"

namespace kvscope::cli {
namespace {

struct DumpArgs {
  ModelOptions model;
  std::string prompt;
  std::string tensor;
  bool list = false;
  bool full = false;
  bool json = false;
};

// One row as eval-callback shows it: the first and last three values.
std::string rowSummary(std::span<const float> row, bool full) {
  std::string out;
  for (size_t i = 0; i < row.size(); ++i) {
    if (!full && row.size() > 6 && i == 3) {
      out += " ...";
      i = row.size() - 4;
      continue;
    }
    out += fmt::format("{}{:.6g}", out.empty() ? "" : " ", row[i]);
  }
  return out;
}

int runDump(const DumpArgs& a, const GlobalOptions& global) {
  if (a.list == !a.tensor.empty()) {
    fmt::print(stderr, "error: give --tensor NAME or --list\n");
    return 1;
  }
  auto session = loadSession(a.model, global);
  if (!session.ok()) {
    fmt::print(stderr, "error: {}\n", session.error().message);
    return 1;
  }
  runtime::Session& s = **session;
  const std::vector<int32_t> tokens = s.tokenizeCompletion(a.prompt);
  const std::string name = a.list ? std::string(backend::kListTensorNames) : a.tensor;
  auto dump = s.dumpTensor(tokens, name);
  if (!dump.ok()) {
    fmt::print(stderr, "error: {}\n", dump.error().message);
    return 1;
  }
  const backend::TensorDump& d = *dump;
  if (a.list) {
    for (const std::string& n : d.names) fmt::print("{}\n", n);
    return 0;
  }
  if (a.json) {
    nlohmann::json out = {{"tensor", d.name}, {"backend", s.backend().name()},
                          {"tokens", tokens}, {"rows", d.rows},
                          {"width", d.width}, {"values", d.values}};
    fmt::print("{}\n", out.dump());
    return 0;
  }
  double sum = 0.0;
  for (float v : d.values) sum += v;
  fmt::print("{} = [{}, {}] ({} backend, {} tokens)  sum = {:.6g}\n", d.name, d.rows, d.width,
             s.backend().name(), tokens.size(), sum);
  for (uint32_t r = 0; r < d.rows; ++r) {
    const std::span<const float> row(d.values.data() + size_t{r} * d.width, d.width);
    fmt::print("  [{}] {}\n", r, rowSummary(row, a.full));
  }
  return 0;
}

}  // namespace

void registerDump(CLI::App& app, const GlobalOptions& global, int& exitCode) {
  static DumpArgs args;
  auto* cmd = app.add_subcommand(
      "dump", "Prefill a prompt and print one named intermediate tensor (diff against llama.cpp)");
  addModelOptions(cmd, args.model);
  cmd->add_option("-p,--prompt", args.prompt, "Prompt text")->required();
  cmd->add_option("--tensor", args.tensor, "The op output to print, e.g. blk.0.ffn_inp");
  cmd->add_flag("--list", args.list, "List the names of every op output instead");
  cmd->add_flag("--full", args.full, "Every value of each row, not the first and last three");
  cmd->add_flag("--json", args.json, "One JSON object with every value");
  cmd->callback([&global, &exitCode] { exitCode = runDump(args, global); });
}

}  // namespace kvscope::cli
