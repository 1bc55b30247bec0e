// `kvscope-cli convert SOURCE -o OUT.gguf`: write a model (Hugging Face folder
// or GGUF) as GGUF with the weight type asked for, optionally taking the
// tokenizer from another file and the chat template from a text file.

#include <fmt/format.h>

#include "cli/commands.h"
#include "core/text_file.h"
#include "gguf/gguf_file.h"
#include "gguf/tensor_type.h"
#include "model/gguf_export.h"
#include "model/model_tokenizer.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/hf_vocab.h"

namespace kvscope::cli {
namespace {

struct ConvertArgs {
  std::string source;
  std::string output;
  std::string type = "F16";
  std::string tokenizer;
  std::string chatTemplate;
  std::string name;
};

Expected<gguf::TensorType> typeByName(const std::string& name) {
  if (auto t = gguf::typeByName(name)) return *t;
  return makeError(ErrorCode::kInvalidArgument, "unknown weight type '{}'", name);
}

// A GGUF file's vocabulary, or a tokenizer.json (given directly or as its folder).
Expected<tokenizer::Vocab> vocabFromPath(const std::filesystem::path& path) {
  if (std::filesystem::is_directory(path))
    return tokenizer::vocabFromHfTokenizerJson(path / "tokenizer.json");
  if (path.extension() == ".json") return tokenizer::vocabFromHfTokenizerJson(path);
  KVS_ASSIGN_OR_RETURN(auto file, gguf::GgufFile::open(path));
  return tokenizer::vocabFromGguf(*file);
}

Status runConvert(const ConvertArgs& a) {
  KVS_ASSIGN_OR_RETURN(const gguf::TensorType type, typeByName(a.type));
  KVS_ASSIGN_OR_RETURN(auto model, model::ModelFile::open(a.source));
  tokenizer::Vocab vocab;
  if (!a.tokenizer.empty()) {
    KVS_ASSIGN_OR_RETURN(vocab, vocabFromPath(a.tokenizer));
  } else {
    KVS_ASSIGN_OR_RETURN(auto own, model::loadTokenizer(*model));
    vocab = own.vocab();
  }
  if (!a.chatTemplate.empty()) {
    KVS_ASSIGN_OR_RETURN(vocab.chatTemplate, readTextFile(a.chatTemplate));
  }
  KVS_ASSIGN_OR_RETURN(auto writer, model::ggufFromModel(*model, vocab, {type, a.name}));
  KVS_TRY(writer.writeFile(a.output));
  const auto& c = model->config();
  fmt::print("wrote {} ({}, {} layers, {} weights, context {}, vocabulary of {})\n", a.output,
             c.architecture, c.nLayer, a.type, c.contextLength, vocab.tokens.size());
  return okStatus();
}

}  // namespace

void registerConvert(CLI::App& app, const GlobalOptions&, int& exitCode) {
  static ConvertArgs args;
  auto* cmd = app.add_subcommand("convert", "Write a model (Hugging Face folder or GGUF) as GGUF");
  cmd->add_option("source", args.source, "Hugging Face folder or GGUF file")->required();
  cmd->add_option("-o,--output", args.output, "Output .gguf path")->required();
  cmd->add_option("--type", args.type, "2-D weight type: F32, F16, BF16, Q8_0, Q4_0, …")
      ->default_val(args.type);
  cmd->add_option("--tokenizer", args.tokenizer,
                  "Take the tokenizer from this GGUF, tokenizer.json or folder");
  cmd->add_option("--chat-template", args.chatTemplate, "Store this file as the chat template");
  cmd->add_option("--name", args.name, "general.name");
  cmd->callback([&exitCode] {
    if (auto s = runConvert(args); !s.ok()) {
      fmt::print(stderr, "error: {}\n", s.error().message);
      exitCode = 1;
    }
  });
}

}  // namespace kvscope::cli
