// Row decoders of the device KV cache codecs (engine/gpu/kv_codec.h; byte
// layouts in engine/kv/kv_scheme.h), for the attention kernels. A row is read
// as 32-bit words of `pages[page].words` from word `base`; decodeGroup
// returns values 8g .. 8g + 7 of the row as four vec2 (value pairs), in the
// codec's attention space: the decoded row for the plain codecs, and for the
// rotated codecs the row in rotated space (turbo: gamma * codebook[code]; a
// rotated block format: its plain format's values of y = R x), so that
// attention never applies R per row. Values past HEAD_DIM read as 0.
//
// The including shader declares HEAD_DIM and the page array `pages`
// (attention_common.glsl) before including this file, and calls
// initCodebooks() first thing in main().
#ifndef KVSCOPE_KV_CODEC_GLSL
#define KVSCOPE_KV_CODEC_GLSL

#include "kv_codec.h"

layout(constant_id = 5) const uint K_CODEC = KVS_CODEC_F16;
layout(constant_id = 6) const uint V_CODEC = KVS_CODEC_F16;
// The codebooks of the turbo codecs (ascending; unit-vector scale, N(0, 1)
// for turbo*b), unused
// entries 0: ids 7..22 for K, 23..38 for V.
layout(constant_id = 7) const float KC0 = 0.0;
layout(constant_id = 8) const float KC1 = 0.0;
layout(constant_id = 9) const float KC2 = 0.0;
layout(constant_id = 10) const float KC3 = 0.0;
layout(constant_id = 11) const float KC4 = 0.0;
layout(constant_id = 12) const float KC5 = 0.0;
layout(constant_id = 13) const float KC6 = 0.0;
layout(constant_id = 14) const float KC7 = 0.0;
layout(constant_id = 15) const float KC8 = 0.0;
layout(constant_id = 16) const float KC9 = 0.0;
layout(constant_id = 17) const float KC10 = 0.0;
layout(constant_id = 18) const float KC11 = 0.0;
layout(constant_id = 19) const float KC12 = 0.0;
layout(constant_id = 20) const float KC13 = 0.0;
layout(constant_id = 21) const float KC14 = 0.0;
layout(constant_id = 22) const float KC15 = 0.0;
layout(constant_id = 23) const float VC0 = 0.0;
layout(constant_id = 24) const float VC1 = 0.0;
layout(constant_id = 25) const float VC2 = 0.0;
layout(constant_id = 26) const float VC3 = 0.0;
layout(constant_id = 27) const float VC4 = 0.0;
layout(constant_id = 28) const float VC5 = 0.0;
layout(constant_id = 29) const float VC6 = 0.0;
layout(constant_id = 30) const float VC7 = 0.0;
layout(constant_id = 31) const float VC8 = 0.0;
layout(constant_id = 32) const float VC9 = 0.0;
layout(constant_id = 33) const float VC10 = 0.0;
layout(constant_id = 34) const float VC11 = 0.0;
layout(constant_id = 35) const float VC12 = 0.0;
layout(constant_id = 36) const float VC13 = 0.0;
layout(constant_id = 37) const float VC14 = 0.0;
layout(constant_id = 38) const float VC15 = 0.0;

// The codebooks, indexed by code. glslang takes no array-valued
// specialization constants, so main() copies them into these private arrays
// once (initCodebooks) rather than building an array value at every call.
float kCodebook[KVS_CODEBOOK_SIZE], vCodebook[KVS_CODEBOOK_SIZE];
void initCodebooks() {
  kCodebook = float[](KC0, KC1, KC2, KC3, KC4, KC5, KC6, KC7, KC8, KC9, KC10, KC11, KC12, KC13,
                      KC14, KC15);
  vCodebook = float[](VC0, VC1, VC2, VC3, VC4, VC5, VC6, VC7, VC8, VC9, VC10, VC11, VC12, VC13,
                      VC14, VC15);
}

const uint KV_BLOCKS = (HEAD_DIM + 31u) / 32u;       // scale blocks of 32 values
const uint KV_GROUPS16 = (HEAD_DIM + 15u) / 16u;     // gamma groups of turbo*g
const uint KV_GROUPS = (HEAD_DIM + 7u) / 8u;         // groups of 8 values (decodeGroup)

// The codec whose bytes c stores (gpu::kvCodecPlain): the plain block
// format of a rotated one, else c.
uint codecPlain(uint c) {
  if (c == KVS_CODEC_Q8_0R) return KVS_CODEC_Q8_0;
  if (c == KVS_CODEC_Q4_0R) return KVS_CODEC_Q4_0;
  if (c == KVS_CODEC_FP8R) return KVS_CODEC_FP8;
  if (c == KVS_CODEC_AFFINE4R) return KVS_CODEC_AFFINE4;
  return c;
}
// Bits per code of codec c (16 for f16).
uint codecBits(uint c) {
  c = codecPlain(c);
  if (c == KVS_CODEC_F16) return 16u;
  if (c == KVS_CODEC_Q8_0 || c == KVS_CODEC_FP8) return 8u;
  if (c == KVS_CODEC_TURBO3 || c == KVS_CODEC_TURBO3G || c == KVS_CODEC_TURBO3W10 ||
      c == KVS_CODEC_TURBO3B) {
    return 3u;
  }
  if (c == KVS_CODEC_TURBO2 || c == KVS_CODEC_TURBO2G || c == KVS_CODEC_TURBO2B) return 2u;
  return 4u;
}
bool codecRotated(uint c) { return c >= KVS_CODEC_TURBO4; }
bool codecHasCodebook(uint c) { return codecRotated(c) && codecPlain(c) == c; }
bool codecGrouped(uint c) { return c >= KVS_CODEC_TURBO4G && c <= KVS_CODEC_TURBO2G; }
bool codecBlockScaled(uint c) { return c >= KVS_CODEC_TURBO4B && c <= KVS_CODEC_TURBO2B; }
// Rotated codecs: values per scale (gamma).
uint codecScaleWidth(uint c) {
  return codecGrouped(c) ? 16u : codecBlockScaled(c) ? 32u : HEAD_DIM;
}
// Bytes before the codes: the scales (or gammas) of a row.
uint codecScaleBytes(uint c) {
  c = codecPlain(c);
  if (c == KVS_CODEC_F16) return 0u;
  if (c == KVS_CODEC_Q8_0 || c == KVS_CODEC_Q4_0) return 2u * KV_BLOCKS;
  if (c == KVS_CODEC_FP8) return KV_BLOCKS;
  if (c == KVS_CODEC_AFFINE4) return 4u * KV_BLOCKS;
  return 2u * ((HEAD_DIM + codecScaleWidth(c) - 1u) / codecScaleWidth(c));
}

// 32 bits of the row from byte `at` (little endian; bytes past the row read
// as whatever follows, callers mask them). `last` is the row's last word:
// the second word is never read past it.
uint rowBits(uint page, uint base, uint last, uint at) {
  const uint w = at >> 2u, shift = (at & 3u) * 8u;
  const uint lo = pages[page].words[base + w];
  if (shift == 0u) return lo;
  const uint hi = pages[page].words[base + min(w + 1u, last)];
  return (lo >> shift) | (hi << (32u - shift));
}
// The fp16 at (even) byte `at`.
float rowHalf(uint page, uint base, uint at) {
  const uint w = pages[page].words[base + (at >> 2u)];
  return unpackHalf2x16((at & 2u) != 0u ? w >> 16u : w).x;
}

// e4m3 byte -> float (kvscope::e4m3ToFloat): 0x7f / 0xff are NaN.
float e4m3Value(uint b) {
  const uint e = (b >> 3u) & 15u, m = b & 7u;
  float r;
  if (e == 15u && m == 7u) {
    r = uintBitsToFloat(0x7fc00000u);
  } else if (e == 0u) {
    r = float(m) * (1.0 / 512.0);
  } else {
    r = uintBitsToFloat(((e + 120u) << 23u) | (m << 20u));  // (1 + m/8) * 2^(e-7)
  }
  return (b & 0x80u) != 0u ? -r : r;
}

// Values 8g .. 8g + 7 of the row at word `base` of `page` for codec `c`
// (with K's codebook when `key`), where `rowWords` is the row stride in words.
void decodeGroup(uint c, bool key, uint page, uint base, uint rowWords, uint g, out vec2 v[4]) {
  c = codecPlain(c);  // a rotated block format decodes as its plain one, in R's space
  float x[8];
  const uint last = rowWords - 1u;
  if (c == KVS_CODEC_F16) {
    for (uint j = 0u; j < 4u; ++j) {
      const vec2 h = unpackHalf2x16(pages[page].words[base + min(4u * g + j, last)]);
      x[2u * j] = h.x;
      x[2u * j + 1u] = h.y;
    }
  } else if (c == KVS_CODEC_Q8_0 || c == KVS_CODEC_FP8) {
    const uint at = codecScaleBytes(c) + 8u * g;
    const uint lo = rowBits(page, base, last, at), hi = rowBits(page, base, last, at + 4u);
    if (c == KVS_CODEC_Q8_0) {
      const float s = rowHalf(page, base, 2u * (g / 4u));
      for (uint j = 0u; j < 8u; ++j) {
        const uint b = ((j < 4u ? lo : hi) >> (8u * (j % 4u))) & 255u;
        x[j] = float(int(b << 24u) >> 24) * s;
      }
    } else {
      const uint eb = (rowBits(page, base, last, g / 4u)) & 255u;
      const float s = eb == 255u ? uintBitsToFloat(0x7fc00000u) : ldexp(1.0, int(eb) - 127);
      for (uint j = 0u; j < 8u; ++j) {
        x[j] = e4m3Value(((j < 4u ? lo : hi) >> (8u * (j % 4u))) & 255u) * s;
      }
    }
  } else if (c == KVS_CODEC_Q4_0 || c == KVS_CODEC_AFFINE4) {
    const uint nib = rowBits(page, base, last, codecScaleBytes(c) + 4u * g);
    const uint b = g / 4u;
    if (c == KVS_CODEC_Q4_0) {
      const float s = rowHalf(page, base, 2u * b);
      for (uint j = 0u; j < 8u; ++j) x[j] = float(int((nib >> (4u * j)) & 15u) - 8) * s;
    } else {
      const float mn = rowHalf(page, base, 2u * b), s = rowHalf(page, base, 2u * (KV_BLOCKS + b));
      for (uint j = 0u; j < 8u; ++j) x[j] = mn + float((nib >> (4u * j)) & 15u) * s;
    }
  } else {
    const uint bits = codecBits(c), codes = codecScaleBytes(c);
    const float gamma = rowHalf(page, base, 2u * (8u * g / codecScaleWidth(c)));
    uint code[8];
    if (c == KVS_CODEC_TURBO3W10) {
      // Values 8g .. 8g + 7 lie in at most two words of 10 codes.
      const uint first = 8u * g / 10u;
      const uint w0 = pages[page].words[base + 1u + first];
      const uint w1 = pages[page].words[base + 1u + min(first + 1u, last - 1u)];
      for (uint j = 0u; j < 8u; ++j) {
        const uint i = 8u * g + j;
        code[j] = ((i / 10u == first ? w0 : w1) >> (3u * (i % 10u))) & 7u;
      }
    } else if (bits == 4u) {
      const uint w = rowBits(page, base, last, codes + 4u * g);
      for (uint j = 0u; j < 8u; ++j) code[j] = (w >> (4u * j)) & 15u;
    } else {
      const uint low = rowBits(page, base, last, codes + 2u * g);
      uint high = 0u;
      if (bits == 3u) high = rowBits(page, base, last, codes + (HEAD_DIM + 3u) / 4u + g) << 2u;
      for (uint j = 0u; j < 8u; ++j) code[j] = ((low >> (2u * j)) & 3u) | ((high >> j) & 4u);
    }
    for (uint j = 0u; j < 8u; ++j) x[j] = gamma * (key ? kCodebook[code[j]] : vCodebook[code[j]]);
  }
  for (uint j = 0u; j < 4u; ++j) {
    v[j] = vec2(x[2u * j], x[2u * j + 1u]);
    if (HEAD_DIM % 8u != 0u) {
      if (8u * g + 2u * j >= HEAD_DIM) v[j].x = 0.0;
      if (8u * g + 2u * j + 1u >= HEAD_DIM) v[j].y = 0.0;
    }
  }
}

void decodeKey(uint page, uint base, uint rowWords, uint g, out vec2 v[4]) {
  decodeGroup(K_CODEC, true, page, base, rowWords, g, v);
}
void decodeValue(uint page, uint base, uint rowWords, uint g, out vec2 v[4]) {
  decodeGroup(V_CODEC, false, page, base, rowWords, g, v);
}

#endif
