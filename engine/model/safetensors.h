#pragma once
// A validated, memory-mapped .safetensors file: an 8-byte little-endian
// header length, a JSON header {name: {dtype, shape, data_offsets}}, then the
// data. Every offset and size is checked against the file before use; a
// corrupt file gives kBadFile naming the tensor, never a crash.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/tensor_type.h"

namespace kvscope::model {

struct SafetensorsEntry {
  std::string name;
  gguf::TensorType type;
  std::vector<uint64_t> shape;  // as stored: row-major, last dimension fastest
  const uint8_t* data;
  uint64_t bytes;
};

class SafetensorsFile {
 public:
  static Expected<std::unique_ptr<SafetensorsFile>> open(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::vector<SafetensorsEntry>& tensors() const { return m_tensors; }
  // `__metadata__` string pairs (e.g. tied-weight aliases written by transformers).
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return m_metadata; }

 private:
  SafetensorsFile() = default;
  Status parse(const std::filesystem::path& path);

  const uint8_t* m_base = nullptr;
  uint64_t m_size = 0;
  std::vector<SafetensorsEntry> m_tensors;
  std::vector<std::pair<std::string, std::string>> m_metadata;
};

}  // namespace kvscope::model
