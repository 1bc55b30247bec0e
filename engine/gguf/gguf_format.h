#pragma once
// Facts of the GGUF container shared by the reader and the writer (internal to
// engine/gguf): magic, versions, limits this build enforces, value sizes.
// Every multi-byte field is little-endian; both sides copy fields with memcpy.

#include <bit>
#include <cstdint>
#include <optional>

#include "gguf/gguf_file.h"

namespace kvscope::gguf::format {

static_assert(std::endian::native == std::endian::little,
              "GGUF fields are copied as-is; a big-endian host would need byte swaps");

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
inline constexpr uint32_t kMinVersion = 2;
inline constexpr uint32_t kMaxVersion = 3;
inline constexpr uint64_t kDefaultAlignment = 32;
inline constexpr char kAlignmentKey[] = "general.alignment";
// Alignment is a power of two no larger than this; bigger values are nonsense
// that would only inflate the padding.
inline constexpr uint64_t kMaxAlignment = uint64_t{1} << 20;
inline constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
// Arrays of arrays deeper than this are refused: no real model nests at all,
// and the limit bounds the reader's recursion.
inline constexpr int kMaxNesting = 8;
// A metadata value costs ~90 bytes in memory but can be 1 byte in the file, so
// the total count is capped: a hostile file can make the reader allocate at
// most ~190 MB. Real vocabularies (tokens + scores + types + merges, e.g.
// Gemma's 262k tokens x 3) stay under ~1M values.
inline constexpr uint64_t kMaxMetadataValues = uint64_t{1} << 21;

inline bool isValueType(uint32_t raw) {
  return raw <= static_cast<uint32_t>(ValueType::kFloat64);
}

// Encoded size of a fixed-size value; nullopt for strings and arrays.
inline std::optional<uint64_t> scalarBytes(ValueType type) {
  switch (type) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool:
      return 1;
    case ValueType::kUint16:
    case ValueType::kInt16:
      return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32:
      return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64:
      return 8;
    case ValueType::kString:
    case ValueType::kArray:
      return std::nullopt;
  }
  return std::nullopt;
}

// The fewest bytes one value of `type` can occupy: a string is at least its
// 8-byte length, an array its 4-byte element type and 8-byte count.
inline uint64_t minEncodedBytes(ValueType type) {
  if (type == ValueType::kString) return 8;
  if (type == ValueType::kArray) return 12;
  return *scalarBytes(type);
}

}  // namespace kvscope::gguf::format
