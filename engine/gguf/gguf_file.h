#pragma once
// A validated, memory-mapped GGUF file (v2 and v3).
//
// open() maps the file read-only and parses the header, all metadata and the
// tensor table up front. Every count, length, offset and size is checked
// against the file size before it is used, so a truncated, corrupt or hostile
// file yields ErrorCode::kBadFile naming what is wrong — never a crash, a huge
// allocation or a read past the end. After open() succeeds, every accessor is
// infallible and every tensor's bytes lie inside the mapping.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "gguf/tensor_type.h"

namespace kvscope::gguf {

// GGUF metadata value types, numbered as in the file format.
enum class ValueType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5,
  kFloat32 = 6, kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11,
  kFloat64 = 12,
};
const char* valueTypeName(ValueType type);

// One metadata value. Scalars are widened on read; arrays keep their element
// type and are stored widened too (strings as std::string). Nested arrays
// (arrays of arrays) are supported.
struct Value {
  ValueType type = ValueType::kUint8;
  ValueType elementType = ValueType::kUint8;  // for kArray
  uint64_t u = 0;      // unsigned integers and bool
  int64_t i = 0;       // signed integers
  double f = 0.0;      // floats
  std::string s;       // kString
  std::vector<Value> array;  // kArray elements
};

struct KeyValue {
  std::string key;
  Value value;
};

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> shape;  // ne[0] is the fastest-varying (row length), as in ggml
  TensorType type = TensorType::kF32;
  uint64_t offset = 0;  // relative to the start of the data section
  uint64_t bytes = 0;   // size of the data, validated against the file

  uint64_t elements() const;
};

class GgufFile {
 public:
  static Expected<std::unique_ptr<GgufFile>> open(const std::filesystem::path& path);
  // Parses an in-memory image (tests, fuzzing). The bytes are copied.
  static Expected<std::unique_ptr<GgufFile>> fromBytes(std::span<const uint8_t> bytes);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return m_version; }
  uint64_t alignment() const { return m_alignment; }
  const std::filesystem::path& path() const { return m_path; }
  uint64_t fileSize() const { return m_size; }
  uint64_t dataOffset() const { return m_dataOffset; }  // start of the aligned data section

  std::span<const KeyValue> metadata() const { return m_kv; }
  const Value* find(std::string_view key) const;

  // Typed getters: nullopt when the key is absent or has an incompatible type
  // (an integer getter accepts any integer type whose value fits).
  std::optional<std::string_view> getString(std::string_view key) const;
  std::optional<uint64_t> getUint(std::string_view key) const;
  std::optional<int64_t> getInt(std::string_view key) const;
  std::optional<double> getFloat(std::string_view key) const;  // any numeric type
  std::optional<bool> getBool(std::string_view key) const;
  // Array getters: nullopt when absent or the element type does not match.
  std::optional<std::vector<std::string>> getStringArray(std::string_view key) const;
  std::optional<std::vector<int64_t>> getIntArray(std::string_view key) const;
  std::optional<std::vector<float>> getFloatArray(std::string_view key) const;

  std::span<const TensorInfo> tensors() const { return m_tensors; }
  const TensorInfo* findTensor(std::string_view name) const;
  // The tensor's raw bytes inside the mapping (valid while this object lives).
  std::span<const uint8_t> tensorData(const TensorInfo& tensor) const;

 private:
  GgufFile() = default;
  Status parse();

  std::filesystem::path m_path;
  const uint8_t* m_base = nullptr;  // start of the mapping (or m_owned)
  uint64_t m_size = 0;
  bool m_mapped = false;
  std::vector<uint8_t> m_owned;  // backing store for fromBytes()
  uint32_t m_version = 0;
  uint64_t m_alignment = 32;
  uint64_t m_dataOffset = 0;  // absolute offset of the data section
  std::vector<KeyValue> m_kv;
  std::vector<TensorInfo> m_tensors;
  // Views into m_kv / m_tensors names, built once both vectors are final.
  std::unordered_map<std::string_view, size_t> m_kvIndex;
  std::unordered_map<std::string_view, size_t> m_tensorIndex;
};

}  // namespace kvscope::gguf
