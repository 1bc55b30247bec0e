#pragma once
// Builds GGUF files (v3, or v2 on request) from metadata key/values of every
// type, nested arrays included, and tensors given as raw bytes of any known
// type. Tensor data is aligned to the value of "general.alignment" when that
// key is set (a uint32 power of two), else to 32 bytes, exactly as the reader
// expects. Input the format cannot hold (a value out of its type's range, an
// array element of the wrong type, data of the wrong size, a repeated tensor
// name) is refused with kInvalidArgument; write failures are kIo. A tensor's
// bytes may also be made while the file is written (addLazyTensor), so a
// writer of a large file holds one tensor at a time.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "gguf/tensor_type.h"

namespace kvscope::gguf {

// Metadata value builders.
Value uint8Value(uint8_t v);
Value int8Value(int8_t v);
Value uint16Value(uint16_t v);
Value int16Value(int16_t v);
Value uint32Value(uint32_t v);
Value int32Value(int32_t v);
Value uint64Value(uint64_t v);
Value int64Value(int64_t v);
Value float32Value(float v);
Value float64Value(double v);
Value boolValue(bool v);
Value stringValue(std::string v);
// Every element must have type `elementType` (arrays may nest).
Value arrayValue(ValueType elementType, std::vector<Value> elements);
Value stringArrayValue(std::span<const std::string> v);
Value int32ArrayValue(std::span<const int32_t> v);
Value float32ArrayValue(std::span<const float> v);

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t version = 3) : m_version(version) {}

  // Sets `key`; a key set again keeps its first position and takes the new value.
  void set(std::string key, Value value);

  // Adds a tensor; shape[0] is the row length (ne[0]) and `data` must be
  // exactly byteSize(type, elements) bytes.
  Status addTensor(std::string name, std::vector<uint64_t> shape, TensorType type,
                   std::vector<uint8_t> data);
  // The bytes made by `make` when the file is written, once per write (make
  // must give the same bytes each time, exactly byteSize(type, elements) of
  // them; other sizes fail the write with kInvalidArgument).
  using MakeBytes = std::function<Expected<std::vector<uint8_t>>()>;
  Status addLazyTensor(std::string name, std::vector<uint64_t> shape, TensorType type,
                       MakeBytes make);
  // Quantizes `values` to `type` (see quantize.h) and adds the result.
  Status addQuantizedTensor(std::string name, std::vector<uint64_t> shape, TensorType type,
                            std::span<const float> values);

  // The file image, piece after piece, to `out`.
  Status write(const std::function<Status(std::span<const uint8_t>)>& out) const;
  // The complete file image.
  Expected<std::vector<uint8_t>> toBytes() const;
  // Writes the image atomically (readers never see a partial file), holding
  // one tensor's bytes at a time.
  Status writeFile(const std::filesystem::path& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> shape;
    TensorType type;
    uint64_t bytes = 0;
    std::vector<uint8_t> data;  // or, when empty and `make` is set, made at write time
    MakeBytes make;
  };
  // Checks a tensor's name, type and shape; its size in bytes.
  Expected<uint64_t> checkTensor(const std::string& name, const std::vector<uint64_t>& shape,
                                 TensorType type) const;

  uint32_t m_version;
  std::vector<KeyValue> m_kv;
  std::vector<Tensor> m_tensors;
};

}  // namespace kvscope::gguf
