#pragma once
// A KV scheme turns one cached row (the K or V vector of one token for one KV
// head, `dim` values) into a fixed number of bytes and back. K and V choose
// schemes independently, per layer. A scheme object is built for one dim and
// one seed (makeScheme) and is immutable afterwards, so it is shared freely
// between threads. This is the CPU reference: GPU kernels of a scheme must
// produce the same bytes (encode) and the same values (decode).
//
// Row layouts (the lead's contract, /work/helpers/KV_LAYOUTS.md). Blocks are
// kKvBlock values, the last one may be partial (nb = ceil(dim / 32)). Every
// row is planar (all scales first, then all codes) and zero-padded to a
// multiple of 4 bytes.
//   f16      [dim x fp16]
//   q8_0     [nb x fp16 scale][dim x int8]
//   q4_0     [nb x fp16 scale][ceil(dim/2) nibbles]
//   fp8      [nb x ue8m0 exponent][dim x e4m3]
//   affine4  [nb x fp16 min][nb x fp16 scale][ceil(dim/2) nibbles]
//   turbo4/3/2     [1 x fp16 gamma][codes]
//   turbo4g/3g/2g  [ceil(dim/16) x fp16 gamma_g][codes]
// Nibbles: byte i = code(2i) low, code(2i+1) high. 2-bit codes: code(4i+k) in
// bits 2k..2k+1 of byte i. 3-bit codes: a 2-bit plane of the low bits
// (ceil(dim/4) bytes) then a 1-bit plane of the high bits (ceil(dim/8) bytes,
// code(8i+k) in bit k of byte i).
//
// Rotated schemes (turbo*, and the block formats q8_0r, q4_0r, fp8r and
// affine4r: scheme_rotated.h) store y = R x, R an orthogonal d x d matrix
// derived from the seed; decodeRotated() returns
// y_hat, decode() returns x_hat = R^T y_hat. Attention uses the rotated form:
// q' = R_k q once per head, scores q' . y_hat_k, V accumulated in R_v's
// space and rotated back once per head (o = R_v^T acc).
//
// Accounting: rowLayout() splits a row's bytes into codes, scales/norms and
// padding; bitsPerValue() is derived from it, never from a formula elsewhere.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace kvscope::kv {

inline constexpr uint32_t kKvBlock = 32;     // values per scale block (q8_0, q4_0, fp8, affine4)
inline constexpr uint32_t kTurboGroup = 16;  // rotated values per gamma in turbo*g
inline constexpr uint32_t kMaxKvDim = 512;   // largest head_dim a scheme accepts
inline constexpr uint64_t kDefaultCacheSeed = 0x6b7673636f706531ull;  // "kvscope1"

struct RowLayout {
  uint32_t codeBytes = 0;
  uint32_t scaleBytes = 0;    // scales, norms, minima
  uint32_t paddingBytes = 0;  // zero bytes up to a multiple of 4
  uint32_t total() const { return codeBytes + scaleBytes + paddingBytes; }
};

// What a row's bytes are, for kernels that read them without decode() (the
// CPU attention's fast paths, cpu::KvRowDecoder): each family has one row
// layout (KV_CODECS.md), whatever its name; a rotated block format's bytes
// are its plain format's, holding the rotated row (decodeRotated's values).
enum class RowCode {
  kF16,      // dim() halves
  kQ8_0,     // per block of 32 an f16 scale, then int8 codes
  kQ4_0,     // per block of 32 an f16 scale, then nibbles
  kAffine4,  // per group of 32 an f16 min and step, then nibbles
  kFp8,      // per block of 32 a UE8M0 scale, then E4M3 codes
  kTurbo,    // rotated codebook codes (kv::TurboScheme: bits, scale)
};

struct SchemeParams {
  uint32_t dim = 0;   // values per row (head_dim), 1 .. kMaxKvDim
  uint64_t seed = 0;  // the row stream's seed (rotated schemes derive R from it)
};

class KvScheme {
 public:
  virtual ~KvScheme() = default;
  virtual std::string_view name() const = 0;
  virtual RowCode rowCode() const = 0;
  uint32_t dim() const { return m_dim; }
  uint64_t seed() const { return m_seed; }
  const RowLayout& rowLayout() const { return m_layout; }
  uint32_t rowBytes() const { return m_layout.total(); }
  double bitsPerValue() const { return 8.0 * rowBytes() / m_dim; }

  // row: dim() floats -> out: rowBytes() bytes (padding written as zeros).
  virtual void encode(std::span<const float> row, std::span<uint8_t> out) const = 0;
  // in: rowBytes() bytes -> row: dim() floats.
  virtual void decode(std::span<const uint8_t> in, std::span<float> row) const = 0;

  // Rotated-space access; the identity for schemes that do not rotate.
  virtual bool rotated() const { return false; }
  // R as dim() x dim() floats, row-major (y = R x); empty when !rotated().
  virtual std::span<const float> rotation() const { return {}; }
  // When R = H diag(s) / sqrt(dim) (dim a power of two, H the Walsh-Hadamard
  // matrix): the signs s, so R x can be applied in O(d log d) (kv::fwht);
  // else empty.
  virtual std::span<const float> hadamardSigns() const { return {}; }
  // The row in rotated space (y_hat); equals decode() when !rotated().
  virtual void decodeRotated(std::span<const uint8_t> in, std::span<float> row) const {
    decode(in, row);
  }
  // The 2^b ascending centroids (unit-vector scale) of codebook schemes; else empty.
  virtual std::span<const float> codebook() const { return {}; }

 protected:
  KvScheme(const SchemeParams& params, RowLayout layout)
      : m_dim(params.dim), m_seed(params.seed), m_layout(layout) {}

 private:
  uint32_t m_dim;
  uint64_t m_seed;
  RowLayout m_layout;
};

// Builds scheme `name` for rows of params.dim values, or a clear error
// (unknown name: lists the names; dim out of range).
Expected<std::shared_ptr<const KvScheme>> makeScheme(std::string_view name,
                                                     const SchemeParams& params);
// Every registered name, in registry order.
std::vector<std::string_view> schemeNames();
bool isSchemeName(std::string_view name);

// The seed of one (layer, part) row stream: a splitmix64 mix of the cache
// seed, the layer and the part (0 = K, 1 = V).
uint64_t streamSeed(uint64_t cacheSeed, uint32_t layer, uint32_t part);

// Zero bytes that pad `bytes` up to a multiple of 4.
inline uint32_t padTo4(uint32_t bytes) {
  return (4 - bytes % 4) % 4;
}

}  // namespace kvscope::kv
