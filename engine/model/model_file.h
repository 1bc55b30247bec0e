#pragma once
// A model on disk, opened and validated: a GGUF file, or a Hugging Face folder
// (config.json + *.safetensors, sharded or not, + tokenizer.json). Either way
// the result is a ModelConfig and a WeightSource with GGUF tensor names.
// Unsupported architectures and corrupt files fail here with a clear error.

#include <deque>
#include <filesystem>
#include <memory>
#include <vector>

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/safetensors.h"
#include "model/weight_source.h"

namespace kvscope::model {

enum class ModelFormat { kGguf, kHuggingFace };

class ModelFile : public WeightSource {
 public:
  static Expected<std::unique_ptr<ModelFile>> open(const std::filesystem::path& path);

  ModelFormat format() const { return m_format; }
  const std::filesystem::path& path() const { return m_path; }
  const ModelConfig& config() const { return m_config; }
  // The GGUF file (tokenizer metadata, chat template); null for HF folders.
  const gguf::GgufFile* gguf() const { return m_gguf.get(); }
  // tokenizer.json of an HF folder; empty for GGUF.
  const std::filesystem::path& tokenizerJson() const { return m_tokenizerJson; }
  // Total bytes of all tensors as stored.
  uint64_t weightBytes() const;

  const TensorView* find(std::string_view name) const override;
  std::span<const TensorView> all() const override { return m_tensors; }

 private:
  ModelFile() = default;
  Status openGguf();
  Status openHf();
  // Maps the file's tensors to GGUF names; those without one go to `unmapped`.
  Status addSafetensors(const SafetensorsFile& file,
                        std::vector<const SafetensorsEntry*>& unmapped);
  // Replaces each norm weight w by 1 + w in float32 (ArchDescription::hfNormsMinusOne).
  Status addOneToNorms();

  ModelFormat m_format = ModelFormat::kGguf;
  std::filesystem::path m_path;
  std::filesystem::path m_tokenizerJson;
  ModelConfig m_config;
  std::unique_ptr<gguf::GgufFile> m_gguf;
  std::vector<std::unique_ptr<SafetensorsFile>> m_shards;
  std::vector<TensorView> m_tensors;
  // Tensors made at load rather than mapped (Gemma's norms with their 1
  // added, experts stacked or repacked: model/hf_experts.h).
  std::deque<std::vector<float>> m_owned;
  std::deque<std::vector<uint8_t>> m_ownedBytes;
};

// Maps a Hugging Face tensor name to its GGUF name: llama/qwen names, and
// the names `arch` lists (ArchDescription::hfLayerNames, hfGlobalNames); a
// multimodal checkpoint's language model ("language_model.model.*",
// "model.language_model.*") is read as "model.*". Empty if unknown (vision
// and audio towers, rotary caches).
std::string hfToGgufName(std::string_view hfName, const ArchDescription* arch = nullptr);

}  // namespace kvscope::model
