#pragma once
// Checksums for files kvscope writes and reads back:
//   - CRC-32C (Castagnoli, reflected, init and final xor 0xFFFFFFFF): guards
//     saved KV cache sections against truncation and bit rot. Incremental:
//     crc32c(b, crc32c(a)) == crc32c(a ++ b).
//   - FNV-1a 64: a cheap identity of a model (model/model_fingerprint.h), not
//     a guard against tampering.

#include <cstdint>
#include <span>
#include <string_view>

namespace kvscope {

uint32_t crc32c(std::span<const uint8_t> bytes, uint32_t previous = 0);

class Fnv1a64 {
 public:
  void add(std::span<const uint8_t> bytes);
  void add(std::string_view text) {
    add({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  }
  void add(uint64_t value);  // its 8 little-endian bytes
  uint64_t value() const { return m_hash; }

 private:
  uint64_t m_hash = 0xcbf29ce484222325ull;
};

}  // namespace kvscope
