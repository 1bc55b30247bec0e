#include "core/checksum.h"

#include <array>

namespace kvscope {
namespace {

// Byte-at-a-time table of the reflected Castagnoli polynomial.
constexpr std::array<uint32_t, 256> makeCrcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kCrcTable = makeCrcTable();

}  // namespace

uint32_t crc32c(std::span<const uint8_t> bytes, uint32_t previous) {
  uint32_t c = ~previous;
  for (uint8_t b : bytes) c = kCrcTable[(c ^ b) & 0xFF] ^ (c >> 8);
  return ~c;
}

void Fnv1a64::add(std::span<const uint8_t> bytes) {
  for (uint8_t b : bytes) {
    m_hash ^= b;
    m_hash *= 0x100000001b3ull;
  }
}

void Fnv1a64::add(uint64_t value) {
  uint8_t bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(value >> (8 * i));
  add(bytes);
}

}  // namespace kvscope
