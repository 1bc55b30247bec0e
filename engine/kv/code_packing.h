#pragma once
// Bit packing of small integer codes inside a KV row, shared by the schemes
// (layouts in kv_scheme.h): 4-bit nibbles (code 2i low, 2i+1 high), 2-bit
// (code 4i+k in bits 2k..2k+1), 3-bit as a 2-bit plane of the low bits
// followed by a 1-bit plane of the high bits (code 8i+k in bit k), and 5-
// and 6-bit as a nibble plane of the low 4 bits followed by a 1-bit plane
// (5) or a 2-bit plane (6) of the high bits. No code straddles a byte;
// unused tail bits are zero.

#include <cstdint>
#include <cstring>
#include <span>

#include "core/float_convert.h"

namespace kvscope::kv {

inline uint32_t packedCodeBytes(uint32_t bits, uint32_t dim) {
  switch (bits) {
    case 4:
      return (dim + 1) / 2;
    case 3:
      return (dim + 3) / 4 + (dim + 7) / 8;
    case 2:
      return (dim + 3) / 4;
    case 5:
      return (dim + 1) / 2 + (dim + 7) / 8;
    case 6:
      return (dim + 1) / 2 + (dim + 3) / 4;
    default:
      return dim;  // 8-bit codes, one per byte
  }
}

// codes[i] < 2^bits; `out` holds packedCodeBytes(bits, codes.size()) bytes.
inline void packCodes(std::span<const uint8_t> codes, uint32_t bits, std::span<uint8_t> out) {
  const auto dim = static_cast<uint32_t>(codes.size());
  std::memset(out.data(), 0, packedCodeBytes(bits, dim));
  for (uint32_t i = 0; i < dim; ++i) {
    const uint8_t c = codes[i];
    switch (bits) {
      case 4:
        out[i / 2] |= static_cast<uint8_t>(c << (4 * (i % 2)));
        break;
      case 3:
        out[i / 4] |= static_cast<uint8_t>((c & 3) << (2 * (i % 4)));
        out[(dim + 3) / 4 + i / 8] |= static_cast<uint8_t>((c >> 2) << (i % 8));
        break;
      case 2:
        out[i / 4] |= static_cast<uint8_t>(c << (2 * (i % 4)));
        break;
      case 5:
        out[i / 2] |= static_cast<uint8_t>((c & 15) << (4 * (i % 2)));
        out[(dim + 1) / 2 + i / 8] |= static_cast<uint8_t>((c >> 4) << (i % 8));
        break;
      case 6:
        out[i / 2] |= static_cast<uint8_t>((c & 15) << (4 * (i % 2)));
        out[(dim + 1) / 2 + i / 4] |= static_cast<uint8_t>((c >> 4) << (2 * (i % 4)));
        break;
      default:
        out[i] = c;
    }
  }
}

// Code i of a row of `dim` codes packed by packCodes.
inline uint8_t unpackCode(std::span<const uint8_t> in, uint32_t bits, uint32_t dim, uint32_t i) {
  switch (bits) {
    case 4:
      return (in[i / 2] >> (4 * (i % 2))) & 15;
    case 3:
      return static_cast<uint8_t>(((in[i / 4] >> (2 * (i % 4))) & 3) |
                                  (((in[(dim + 3) / 4 + i / 8] >> (i % 8)) & 1) << 2));
    case 2:
      return (in[i / 4] >> (2 * (i % 4))) & 3;
    case 5:
      return static_cast<uint8_t>(((in[i / 2] >> (4 * (i % 2))) & 15) |
                                  (((in[(dim + 1) / 2 + i / 8] >> (i % 8)) & 1) << 4));
    case 6:
      return static_cast<uint8_t>(((in[i / 2] >> (4 * (i % 2))) & 15) |
                                  (((in[(dim + 1) / 2 + i / 4] >> (2 * (i % 4))) & 3) << 4));
    default:
      return in[i];
  }
}

// Little-endian fp16 fields; storeHalf returns the value a decoder reads back.
inline float storeHalf(std::span<uint8_t> out, uint32_t index, float value) {
  const uint16_t h = floatToFp16(value);
  std::memcpy(out.data() + 2 * size_t{index}, &h, 2);
  return fp16ToFloat(h);
}
inline float loadHalf(std::span<const uint8_t> in, uint32_t index) {
  uint16_t h;
  std::memcpy(&h, in.data() + 2 * size_t{index}, 2);
  return fp16ToFloat(h);
}

// Blocks of kKvBlock values in a row of `dim` (the last may be partial).
inline uint32_t blockCount(uint32_t dim, uint32_t block) {
  return (dim + block - 1) / block;
}

}  // namespace kvscope::kv
