// `kvscope-cli inspect -m MODEL [--json]`: what a model file is, before loading it.
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "model/model_file.h"
#include "model/model_tokenizer.h"
#include "runtime/memory_estimate.h"
#include "tokenizer/chat_template.h"

namespace kvscope::cli {
namespace {

const char* ropeStyleName(model::RopeStyle s) {
  return s == model::RopeStyle::kNeox ? "neox" : "normal";
}

// Each layer's heads, KV heads and head width where the layers differ
// (Gemma 4); null where every layer has the top-level fields.
nlohmann::json layerAttentionJson(const model::ModelConfig& c) {
  if (c.uniformAttention()) return nullptr;
  nlohmann::json layers = nlohmann::json::array();
  for (uint32_t l = 0; l < c.nLayer; ++l) {
    layers.push_back(
        {{"heads", c.headsOf(l)}, {"kv_heads", c.headsKvOf(l)}, {"head_dim", c.headDimOf(l)}});
  }
  return layers;
}

// Which layers attend a sliding window and which the whole context.
nlohmann::json attentionJson(const model::ModelConfig& c) {
  if (c.slidingWindow == 0)
    return {{"sliding_window", nullptr}, {"window_layers", 0}, {"global_layers", nullptr}};
  std::vector<uint32_t> global;
  for (uint32_t l = 0; l < c.nLayer; ++l)
    if (!c.isWindowLayer(l)) global.push_back(l);
  return {{"sliding_window", c.slidingWindow},
          {"window_layers", c.nLayer - global.size()},
          {"global_layers", global},
          {"window_rope_theta", c.ropeThetaWindow}};
}

// KV-shared layers (Gemma 4): which storing layer's rows each reads; null
// where every layer stores its own.
nlohmann::json kvSharingJson(const model::ModelConfig& c) {
  if (c.nKvShared == 0) return nullptr;
  nlohmann::json reads = nlohmann::json::object();
  for (uint32_t l = c.kvLayers(); l < c.nLayer; ++l) reads[std::to_string(l)] = c.kvSourceOf(l);
  return {{"storing_layers", c.kvLayers()}, {"reads", reads}};
}

const char* ropeScalingName(model::RopeScaling s) {
  switch (s) {
    case model::RopeScaling::kNone:
      return "none";
    case model::RopeScaling::kLinear:
      return "linear";
    case model::RopeScaling::kFreqFactors:
      return "frequency factors (llama3)";
    case model::RopeScaling::kLongRope:
      return "LongRoPE";
    case model::RopeScaling::kYarn:
      return "YaRN";
    case model::RopeScaling::kProportional:
      return "proportional";
  }
  return "none";
}

struct TypeStats {
  uint64_t tensors = 0;
  uint64_t bytes = 0;
};

nlohmann::json describe(const model::ModelFile& m, const tokenizer::Tokenizer& tok,
                        const runtime::MemoryEstimate& kv) {
  const auto& c = m.config();
  std::map<std::string, TypeStats> histogram;
  std::set<const uint8_t*> seen;  // a tied alias is the same tensor
  for (const auto& t : m.all()) {
    if (!seen.insert(t.data.data()).second) continue;
    auto& h = histogram[std::string(gguf::traits(t.type).name)];
    h.tensors += 1;
    h.bytes += t.data.size();
  }
  nlohmann::json types = nlohmann::json::object();
  for (const auto& [name, s] : histogram)
    types[name] = {{"tensors", s.tensors}, {"bytes", s.bytes}};
  const auto& v = tok.vocab();
  const tokenizer::ChatTemplate chat(v.chatTemplate, m.path().filename().string());
  auto tokenText = [&](tokenizer::TokenId id) {
    return id == tokenizer::kNoToken ? nlohmann::json(nullptr)
                                     : nlohmann::json(std::string(tok.piece(id, true)));
  };
  return {
      {"path", m.path().string()},
      {"format", m.format() == model::ModelFormat::kGguf ? "gguf" : "huggingface"},
      {"name", c.name},
      {"architecture", c.architecture},
      {"layers", c.nLayer},
      {"embedding", c.nEmbd},
      {"feed_forward", c.nFf},
      {"heads", c.nHead},
      {"kv_heads", c.nHeadKv},
      {"head_dim", c.headDim},
      {"layer_attention", layerAttentionJson(c)},
      {"context_length", c.contextLength},
      {"rms_eps", c.rmsEps},
      {"rope",
       {{"style", ropeStyleName(c.rope.style)},
        {"theta", c.rope.theta},
        {"dims", c.rope.dims},
        {"scaling", ropeScalingName(c.rope.scaling)},
        {"factor", c.rope.factor}}},
      {"attention", attentionJson(c)},
      {"experts", c.nExpert == 0 ? nlohmann::json(nullptr)
                                 : nlohmann::json{{"count", c.nExpert},
                                                  {"used", c.nExpertUsed},
                                                  {"feed_forward", c.nFfExp}}},
      {"kv_sharing", kvSharingJson(c)},
      {"per_layer_input",
       c.nEmbdPerLayer == 0 ? nlohmann::json(nullptr) : nlohmann::json(c.nEmbdPerLayer)},
      {"final_logit_softcap",
       c.finalLogitSoftcap == 0.0f ? nlohmann::json(nullptr) : nlohmann::json(c.finalLogitSoftcap)},
      {"tied_embeddings", c.tiedEmbeddings},
      {"vocab_size", tok.size()},
      {"vocab_type", v.kind == tokenizer::VocabKind::kSpm ? "spm" : "bpe"},
      {"pre_tokenizer",
       v.kind == tokenizer::VocabKind::kBpe ? nlohmann::json(v.preTokenizer) : nullptr},
      {"bos", tokenText(v.bos)},
      {"eos", tokenText(v.eos)},
      {"chat_template", std::string(chat.familyName())},
      {"chat_template_error",
       chat.parseError() ? nlohmann::json(chat.parseError()->message) : nlohmann::json(nullptr)},
      {"chat_template_reads_thinking", chat.readsThinking()},
      {"tensor_types", types},
      {"weight_bytes", m.weightBytes()},
      {"kv_bytes_per_token_f16", kv.kvBytesPerToken},
      {"kv_ring_bytes_f16", kv.kvRingBytes},
  };
}

std::string attentionText(const nlohmann::json& a) {
  if (a["sliding_window"].is_null()) return "the whole context on every layer";
  const auto& global = a["global_layers"];
  const uint64_t layers = a["window_layers"].get<uint64_t>() + global.size();
  std::vector<std::string> ids;
  for (const auto& l : global) ids.push_back(l.dump());
  return fmt::format("a sliding window of {} on {} of {} layers (RoPE theta {}); global: {}",
                     a["sliding_window"].get<uint64_t>(), a["window_layers"].get<uint64_t>(),
                     layers, a["window_rope_theta"].get<double>(),
                     ids.empty() ? std::string("none") : fmt::format("{}", fmt::join(ids, ", ")));
}

std::string mib(uint64_t bytes) {
  return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / (1 << 20));
}

void printTable(const nlohmann::json& j) {
  auto s = [&](const char* k) { return j[k].is_null() ? std::string("-") : j[k].dump(); };
  fmt::print("{}\n", j["path"].get<std::string>());
  fmt::print("  format          {}\n", j["format"].get<std::string>());
  if (!j["name"].get<std::string>().empty())
    fmt::print("  name            {}\n", j["name"].get<std::string>());
  fmt::print("  architecture    {}\n", j["architecture"].get<std::string>());
  fmt::print("  layers          {}\n", s("layers"));
  fmt::print("  embedding       {} (feed-forward {})\n", s("embedding"), s("feed_forward"));
  if (j["layer_attention"].is_null()) {
    fmt::print("  heads           {} query, {} KV, head_dim {}\n", s("heads"), s("kv_heads"),
               s("head_dim"));
  } else {  // per layer: runs of alike layers
    const auto& layers = j["layer_attention"];
    for (size_t first = 0; first < layers.size();) {
      size_t last = first;
      while (last + 1 < layers.size() && layers[last + 1] == layers[first]) ++last;
      const auto& l = layers[first];
      fmt::print("  heads {:>9} {} query, {} KV, head_dim {}\n",
                 first == last ? fmt::format("{}", first) : fmt::format("{}-{}", first, last),
                 l["heads"].dump(), l["kv_heads"].dump(), l["head_dim"].dump());
      first = last + 1;
    }
  }
  fmt::print("  context         {}\n", s("context_length"));
  const auto& r = j["rope"];
  fmt::print("  rope            {}, theta {}, {} dims, scaling {}\n", r["style"].get<std::string>(),
             r["theta"].get<double>(), r["dims"].get<int>(), r["scaling"].get<std::string>());
  fmt::print("  attention       {}\n", attentionText(j["attention"]));
  if (!j["experts"].is_null()) {
    const auto& e = j["experts"];
    fmt::print("  experts         {} per layer, {} per token, feed-forward {} each\n",
               e["count"].get<uint64_t>(), e["used"].get<uint64_t>(),
               e["feed_forward"].get<uint64_t>());
  }
  if (!j["kv_sharing"].is_null()) {
    std::vector<std::string> reads;
    for (const auto& [layer, from] : j["kv_sharing"]["reads"].items())
      reads.push_back(fmt::format("{} <- {}", layer, from.get<uint64_t>()));
    fmt::print("  KV sharing      layers 0-{} store K/V rows; the others read a layer's: {}\n",
               j["kv_sharing"]["storing_layers"].get<uint64_t>() - 1, fmt::join(reads, ", "));
  }
  if (!j["per_layer_input"].is_null())
    fmt::print("  per-layer input {} values per layer\n", j["per_layer_input"].get<uint64_t>());
  if (!j["final_logit_softcap"].is_null())
    fmt::print("  logit soft-cap  {}\n", j["final_logit_softcap"].get<double>());
  fmt::print("  vocab           {} tokens, {}{}\n", s("vocab_size"),
             j["vocab_type"].get<std::string>(),
             j["pre_tokenizer"].is_null()
                 ? ""
                 : " (pre-tokenizer " + j["pre_tokenizer"].get<std::string>() + ")");
  fmt::print("  bos / eos       {} / {}\n", s("bos"), s("eos"));
  fmt::print("  chat template   {}\n", j["chat_template"].get<std::string>());
  fmt::print("  weights         {}{}\n", mib(j["weight_bytes"].get<uint64_t>()),
             j["tied_embeddings"].get<bool>() ? " (tied embeddings)" : "");
  for (const auto& [type, st] : j["tensor_types"].items()) {
    fmt::print("    {:<6} {:>5} tensors  {}\n", type, st["tensors"].get<uint64_t>(),
               mib(st["bytes"].get<uint64_t>()));
  }
  // Window layers keep a ring of fixed size: what a token adds is the global layers'.
  if (j["kv_ring_bytes_f16"].get<uint64_t>() == 0) {
    fmt::print("  KV cache (f16)  {} bytes per token\n", s("kv_bytes_per_token_f16"));
  } else {
    fmt::print(
        "  KV cache (f16)  {} bytes per token on the global layers, + {} in the window "
        "layers' rings\n",
        s("kv_bytes_per_token_f16"), mib(j["kv_ring_bytes_f16"].get<uint64_t>()));
  }
}

}  // namespace

void registerInspect(CLI::App& app, const GlobalOptions&, int& exitCode) {
  auto* cmd = app.add_subcommand("inspect",
                                 "Show a model's architecture, sizes, tokenizer and chat template");
  static std::string path;
  static bool json = false;
  addModelPathOption(cmd, path);
  cmd->add_flag("--json", json, "Print JSON");
  cmd->callback([&exitCode] {
    auto m = openModelOrDemo(path);
    if (!m.ok()) {
      fmt::print(stderr, "error: {}\n", m.error().message);
      exitCode = 1;
      return;
    }
    auto tok = model::loadTokenizer(**m);
    if (!tok.ok()) {
      fmt::print(stderr, "error: {}\n", tok.error().message);
      exitCode = 1;
      return;
    }
    // The f16 cache's bytes at the trained context: per token and the rings.
    auto f16 = kv::KvPolicy::parse("kv=f16");
    auto kv = f16.ok() ? runtime::estimateMemory(**m, 0, *f16)
                       : Expected<runtime::MemoryEstimate>(f16.takeError());
    if (!kv.ok()) {
      fmt::print(stderr, "error: {}\n", kv.error().message);
      exitCode = 1;
      return;
    }
    const auto j = describe(**m, *tok, *kv);
    if (json)
      fmt::print("{}\n", j.dump(2));
    else
      printTable(j);
  });
}

}  // namespace kvscope::cli
