#include "model/model_file.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>

#include <nlohmann/json.hpp>

#include "core/json_depth.h"
#include "gguf/dequant.h"
#include "model/description.h"
#include "model/hf_experts.h"

namespace kvscope::model {
namespace {

Expected<nlohmann::json> readJson(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError(ErrorCode::kNotFound, "cannot read {}", path.string());
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (jsonNestingDepth(text) > kMaxJsonDepth) {
    return makeError(ErrorCode::kBadFile, "{} nests deeper than {} levels", path.string(),
                     kMaxJsonDepth);
  }
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded())
    return makeError(ErrorCode::kBadFile, "{} is not valid JSON", path.string());
  return j;
}

}  // namespace

std::string hfToGgufName(std::string_view hfName, const ArchDescription* arch) {
  // A multimodal checkpoint's language model: "language_model.model.*"
  // (Gemma 3) or "model.language_model.*" (Gemma 4), read as "model.*".
  constexpr std::string_view kGemma3 = "language_model.", kGemma4 = "model.language_model.";
  std::string name(hfName);
  if (name.starts_with(kGemma3)) {
    name.erase(0, kGemma3.size());
  } else if (name.starts_with(kGemma4)) {
    name.replace(0, kGemma4.size(), "model.");
  }
  std::string_view hf = name;
  static const std::pair<std::string_view, std::string_view> kGlobal[] = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"},
  };
  for (const auto& [from, to] : kGlobal)
    if (hf == from) return std::string(to);
  if (arch)
    for (const auto& [from, to] : arch->hfGlobalNames)
      if (hf == from) return std::string(to);
  static const std::pair<std::string_view, std::string_view> kLayer[] = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
  };
  constexpr std::string_view kPrefix = "model.layers.";
  if (hf.substr(0, kPrefix.size()) != kPrefix) return {};
  hf.remove_prefix(kPrefix.size());
  const size_t dot = hf.find('.');
  if (dot == 0 || dot == std::string_view::npos) return {};
  const std::string_view layer = hf.substr(0, dot);
  if (!std::all_of(layer.begin(), layer.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return {};
  const std::string_view rest = hf.substr(dot + 1);
  if (arch)
    for (const auto& [from, to] : arch->hfLayerNames)
      if (rest == from) return fmt::format("blk.{}.{}", layer, to);
  for (const auto& [from, to] : kLayer)
    if (rest == from) return fmt::format("blk.{}.{}", layer, to);
  return {};
}

Expected<std::unique_ptr<ModelFile>> ModelFile::open(const std::filesystem::path& path) {
  std::unique_ptr<ModelFile> m(new ModelFile());
  m->m_path = path;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return makeError(ErrorCode::kNotFound, "{} does not exist", path.string());
  if (std::filesystem::is_directory(path, ec)) {
    m->m_format = ModelFormat::kHuggingFace;
    KVS_TRY(m->openHf());
  } else {
    KVS_TRY(m->openGguf());
  }
  return m;
}

Status ModelFile::openGguf() {
  KVS_ASSIGN_OR_RETURN(m_gguf, gguf::GgufFile::open(m_path));
  KVS_ASSIGN_OR_RETURN(m_config, configFromGguf(*m_gguf));
  for (const auto& t : m_gguf->tensors())
    m_tensors.push_back({t.name, t.type, t.shape, m_gguf->tensorData(t)});
  return okStatus();
}

Status ModelFile::openHf() {
  KVS_ASSIGN_OR_RETURN(auto config, readJson(m_path / "config.json"));
  KVS_ASSIGN_OR_RETURN(m_config, configFromHf(config));
  if (std::filesystem::exists(m_path / "tokenizer.json"))
    m_tokenizerJson = m_path / "tokenizer.json";

  std::vector<std::filesystem::path> shards;
  if (std::filesystem::exists(m_path / "model.safetensors.index.json")) {
    KVS_ASSIGN_OR_RETURN(auto index, readJson(m_path / "model.safetensors.index.json"));
    std::set<std::string> files;
    if (index.contains("weight_map") && index["weight_map"].is_object())
      for (auto& [name, file] : index["weight_map"].items())
        if (file.is_string()) files.insert(file.get<std::string>());
    for (const auto& f : files) {
      if (f.find('/') != std::string::npos || f.find("..") != std::string::npos) {
        return makeError(ErrorCode::kBadFile,
                         "model.safetensors.index.json names a file outside the folder: {}", f);
      }
      shards.push_back(m_path / f);
    }
  } else if (std::filesystem::exists(m_path / "model.safetensors")) {
    shards.push_back(m_path / "model.safetensors");
  }
  if (shards.empty()) {
    return makeError(
        ErrorCode::kNotFound,
        "{} has no model.safetensors (or index); only safetensors weights are supported",
        m_path.string());
  }
  std::vector<const SafetensorsEntry*> unmapped;
  for (const auto& s : shards) {
    KVS_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open(s));
    KVS_TRY(addSafetensors(*file, unmapped));
    m_shards.push_back(std::move(file));
  }
  KVS_TRY(assembleHfExperts(m_config, unmapped, m_tensors, m_ownedBytes));
  // transformers saves tied weights once; the other name is an alias. A
  // checkpoint with no lm_head is tied whatever its config says (Gemma's
  // configs leave tie_word_embeddings to the class default).
  if (!find("output.weight") && find("token_embd.weight")) m_config.tiedEmbeddings = true;
  if (!find("token_embd.weight") && m_config.tiedEmbeddings) {
    if (const TensorView* out = find("output.weight")) {
      TensorView alias = *out;
      alias.name = "token_embd.weight";
      m_tensors.push_back(std::move(alias));
    }
  }
  if (m_config.arch->description->hfNormsMinusOne) KVS_TRY(addOneToNorms());
  return okStatus();
}

Status ModelFile::addOneToNorms() {
  const ArchDescription& d = *m_config.arch->description;
  std::set<std::string> names;
  for (const auto& rule : d.globals)
    if (rule.kind == TensorKind::kNorm) names.emplace(rule.name);
  for (uint32_t l = 0; l < m_config.nLayer; ++l)
    for (const auto& rule : d.layer)
      if (rule.kind == TensorKind::kNorm) names.insert(fmt::format("blk.{}.{}", l, rule.name));
  for (TensorView& t : m_tensors) {
    if (!names.contains(t.name)) continue;
    std::vector<float>& w = m_owned.emplace_back(t.elements());
    KVS_TRY(gguf::dequantize(t.type, t.data, w));
    for (float& x : w) x += 1.0f;
    t.type = gguf::TensorType::kF32;
    t.data = {reinterpret_cast<const uint8_t*>(w.data()), w.size() * sizeof(float)};
  }
  return okStatus();
}

Status ModelFile::addSafetensors(const SafetensorsFile& file,
                                 std::vector<const SafetensorsEntry*>& unmapped) {
  for (const auto& e : file.tensors()) {
    std::string name = hfToGgufName(e.name, m_config.arch->description);
    if (name.empty()) {  // experts to stack, rotary caches the engine recomputes, vision towers
      unmapped.push_back(&e);
      continue;
    }
    if (find(name))
      return makeError(ErrorCode::kBadFile, "tensor {} appears twice in the shards", e.name);
    std::vector<uint64_t> shape(e.shape.rbegin(), e.shape.rend());  // GGUF order: fastest first
    m_tensors.push_back({std::move(name), e.type, std::move(shape), {e.data, e.bytes}});
  }
  return okStatus();
}

const TensorView* ModelFile::find(std::string_view name) const {
  for (const auto& t : m_tensors)
    if (t.name == name) return &t;
  return nullptr;
}

uint64_t ModelFile::weightBytes() const {
  uint64_t total = 0;
  std::set<const uint8_t*> seen;  // tied aliases share their bytes
  for (const auto& t : m_tensors)
    if (seen.insert(t.data.data()).second) total += t.data.size();
  return total;
}

}  // namespace kvscope::model
