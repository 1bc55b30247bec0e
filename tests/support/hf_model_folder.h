#pragma once
// A tiny random-weight Hugging Face Llama folder around a real tokenizer:
// config.json + model.safetensors (F32, 1 layer, width 16, tied embeddings)
// with the embedding rows the tokenizer needs, and the tokenizer.json and
// tokenizer_config.json copied from `tokenizerDir`. A few MB; made at run time.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace kvscope::test {

// One safetensors file: a JSON header, then every tensor's data in order;
// shapes in safetensors' [out, in] order. A tensor is F32 `values`, or U8
// `bytes` where those are given.
struct SafetensorsTensor {
  std::string name;
  std::vector<uint64_t> shape;
  std::vector<float> values;
  std::vector<uint8_t> bytes;
};
inline void writeSafetensors(const std::filesystem::path& path,
                             const std::vector<SafetensorsTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t end = 0;
  const auto size = [](const SafetensorsTensor& t) {
    return t.bytes.empty() ? t.values.size() * sizeof(float) : t.bytes.size();
  };
  for (const SafetensorsTensor& t : tensors) {
    const uint64_t begin = end;
    end += size(t);
    header[t.name] = {{"dtype", t.bytes.empty() ? "F32" : "U8"},
                      {"shape", t.shape},
                      {"data_offsets", {begin, end}}};
  }
  const std::string text = header.dump();
  const uint64_t length = text.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&length), sizeof(length));
  out << text;
  for (const SafetensorsTensor& t : tensors) {
    const void* data = t.bytes.empty() ? static_cast<const void*>(t.values.data()) : t.bytes.data();
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size(t)));
  }
}

inline void writeHfLlamaFolder(const std::filesystem::path& dir, uint32_t vocabSize,
                               const std::filesystem::path& tokenizerDir) {
  constexpr uint32_t kWidth = 16, kHeads = 2, kKvHeads = 1, kHeadDim = 8, kFf = 32;
  std::filesystem::create_directories(dir);
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
    std::filesystem::copy_file(tokenizerDir / name, dir / name,
                               std::filesystem::copy_options::overwrite_existing);
  }
  const nlohmann::json config = {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"hidden_size", kWidth},
      {"intermediate_size", kFf},
      {"num_hidden_layers", 1},
      {"num_attention_heads", kHeads},
      {"num_key_value_heads", kKvHeads},
      {"head_dim", kHeadDim},
      {"max_position_embeddings", 256},
      {"rms_norm_eps", 1e-5},
      {"rope_theta", 500000.0},
      {"tie_word_embeddings", true},
      {"torch_dtype", "float32"},
      {"vocab_size", vocabSize},
  };
  std::ofstream(dir / "config.json") << config.dump(2);

  // safetensors: [out, in] row-major shapes, one F32 blob after a JSON header.
  const std::string p = "model.layers.0.";
  const std::vector<std::pair<std::string, std::vector<uint64_t>>> tensors = {
      {"model.embed_tokens.weight", {vocabSize, kWidth}},
      {p + "input_layernorm.weight", {kWidth}},
      {p + "self_attn.q_proj.weight", {kHeads * kHeadDim, kWidth}},
      {p + "self_attn.k_proj.weight", {kKvHeads * kHeadDim, kWidth}},
      {p + "self_attn.v_proj.weight", {kKvHeads * kHeadDim, kWidth}},
      {p + "self_attn.o_proj.weight", {kWidth, kHeads * kHeadDim}},
      {p + "post_attention_layernorm.weight", {kWidth}},
      {p + "mlp.gate_proj.weight", {kFf, kWidth}},
      {p + "mlp.up_proj.weight", {kFf, kWidth}},
      {p + "mlp.down_proj.weight", {kWidth, kFf}},
      {"model.norm.weight", {kWidth}},
  };
  std::vector<SafetensorsTensor> written;
  uint64_t seed = 1;  // each tensor seeded by 1 + the count of floats before it
  for (const auto& [name, shape] : tensors) {
    uint64_t n = 1;
    for (const uint64_t d : shape) n *= d;
    written.push_back({name, shape, randomFloats(n, static_cast<uint32_t>(seed), -0.1f, 0.1f)});
    seed += n;
  }
  writeSafetensors(dir / "model.safetensors", written);
}

}  // namespace kvscope::test
