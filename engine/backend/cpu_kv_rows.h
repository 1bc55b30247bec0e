#pragma once
// Decodes runs of consecutive cached rows of one KV stream into float32, in
// the scheme's rotated space (KvScheme::decodeRotated), with one kernel per
// row format chosen when the decoder is built: the attention kernels call it
// once per tile of rows instead of once per element through the scheme.
//
// The AVX2 kernels (f16, q8_0, q4_0, fp8, affine4, turbo2/3/4 and their
// group- and block-scaled forms, turbo5b/6b, for head dims that are multiples of 8) compute every
// value with the same float operations as the scheme's own decoder, so their output is bit for bit
// that of decodeRotated (tests/backend/cpu_attention_test.cpp). Every other case decodes row by row
// through the scheme.

#include <cstddef>
#include <cstdint>

#include "kv/kv_scheme.h"

namespace kvscope::cpu {

class KvRowDecoder {
 public:
  // `portable`: always decode through the scheme (tests compare both).
  explicit KvRowDecoder(const kv::KvScheme& scheme, bool portable = false);

  // rows: `count` rows of rowBytes() each, back to back (one page run) ->
  // out: [count][stride] floats, values [dim, stride) of each row untouched.
  void decode(const uint8_t* rows, uint32_t count, float* out, size_t stride) const;

 private:
  using Kernel = void (*)(const KvRowDecoder& self, const uint8_t* rows, uint32_t count, float* out,
                          size_t stride);

  const kv::KvScheme& m_scheme;
  Kernel m_kernel = nullptr;  // null: decode through the scheme
  uint32_t m_dim = 0;
  uint32_t m_rowBytes = 0;
  uint32_t m_codesAt = 0;              // byte offset of the codes in a row
  alignas(32) float m_table[64] = {};  // turbo: the codebook (up to 6 bits)

  friend struct RowKernels;
};

}  // namespace kvscope::cpu
