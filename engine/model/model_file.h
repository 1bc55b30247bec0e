#pragma once
// A model on disk, opened and validated: a GGUF file, or a Hugging Face folder
// (config.json + *.safetensors, sharded or not, + tokenizer.json). Either way
// the result is a ModelConfig and a WeightSource with GGUF tensor names.
// Unsupported architectures and corrupt files fail here with a clear error.

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
  Status addSafetensors(const SafetensorsFile& file);

  ModelFormat m_format = ModelFormat::kGguf;
  std::filesystem::path m_path;
  std::filesystem::path m_tokenizerJson;
  ModelConfig m_config;
  std::unique_ptr<gguf::GgufFile> m_gguf;
  std::vector<std::unique_ptr<SafetensorsFile>> m_shards;
  std::vector<TensorView> m_tensors;
};

// Maps a Hugging Face llama/qwen tensor name to its GGUF name; empty if unknown.
std::string hfToGgufName(std::string_view hfName);

}  // namespace kvscope::model
