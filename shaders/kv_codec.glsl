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
// for turbo*b), unused entries 0: ids 7..70 for K, 71..134 for V.
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
layout(constant_id = 23) const float KC16 = 0.0;
layout(constant_id = 24) const float KC17 = 0.0;
layout(constant_id = 25) const float KC18 = 0.0;
layout(constant_id = 26) const float KC19 = 0.0;
layout(constant_id = 27) const float KC20 = 0.0;
layout(constant_id = 28) const float KC21 = 0.0;
layout(constant_id = 29) const float KC22 = 0.0;
layout(constant_id = 30) const float KC23 = 0.0;
layout(constant_id = 31) const float KC24 = 0.0;
layout(constant_id = 32) const float KC25 = 0.0;
layout(constant_id = 33) const float KC26 = 0.0;
layout(constant_id = 34) const float KC27 = 0.0;
layout(constant_id = 35) const float KC28 = 0.0;
layout(constant_id = 36) const float KC29 = 0.0;
layout(constant_id = 37) const float KC30 = 0.0;
layout(constant_id = 38) const float KC31 = 0.0;
layout(constant_id = 39) const float KC32 = 0.0;
layout(constant_id = 40) const float KC33 = 0.0;
layout(constant_id = 41) const float KC34 = 0.0;
layout(constant_id = 42) const float KC35 = 0.0;
layout(constant_id = 43) const float KC36 = 0.0;
layout(constant_id = 44) const float KC37 = 0.0;
layout(constant_id = 45) const float KC38 = 0.0;
layout(constant_id = 46) const float KC39 = 0.0;
layout(constant_id = 47) const float KC40 = 0.0;
layout(constant_id = 48) const float KC41 = 0.0;
layout(constant_id = 49) const float KC42 = 0.0;
layout(constant_id = 50) const float KC43 = 0.0;
layout(constant_id = 51) const float KC44 = 0.0;
layout(constant_id = 52) const float KC45 = 0.0;
layout(constant_id = 53) const float KC46 = 0.0;
layout(constant_id = 54) const float KC47 = 0.0;
layout(constant_id = 55) const float KC48 = 0.0;
layout(constant_id = 56) const float KC49 = 0.0;
layout(constant_id = 57) const float KC50 = 0.0;
layout(constant_id = 58) const float KC51 = 0.0;
layout(constant_id = 59) const float KC52 = 0.0;
layout(constant_id = 60) const float KC53 = 0.0;
layout(constant_id = 61) const float KC54 = 0.0;
layout(constant_id = 62) const float KC55 = 0.0;
layout(constant_id = 63) const float KC56 = 0.0;
layout(constant_id = 64) const float KC57 = 0.0;
layout(constant_id = 65) const float KC58 = 0.0;
layout(constant_id = 66) const float KC59 = 0.0;
layout(constant_id = 67) const float KC60 = 0.0;
layout(constant_id = 68) const float KC61 = 0.0;
layout(constant_id = 69) const float KC62 = 0.0;
layout(constant_id = 70) const float KC63 = 0.0;
layout(constant_id = 71) const float VC0 = 0.0;
layout(constant_id = 72) const float VC1 = 0.0;
layout(constant_id = 73) const float VC2 = 0.0;
layout(constant_id = 74) const float VC3 = 0.0;
layout(constant_id = 75) const float VC4 = 0.0;
layout(constant_id = 76) const float VC5 = 0.0;
layout(constant_id = 77) const float VC6 = 0.0;
layout(constant_id = 78) const float VC7 = 0.0;
layout(constant_id = 79) const float VC8 = 0.0;
layout(constant_id = 80) const float VC9 = 0.0;
layout(constant_id = 81) const float VC10 = 0.0;
layout(constant_id = 82) const float VC11 = 0.0;
layout(constant_id = 83) const float VC12 = 0.0;
layout(constant_id = 84) const float VC13 = 0.0;
layout(constant_id = 85) const float VC14 = 0.0;
layout(constant_id = 86) const float VC15 = 0.0;
layout(constant_id = 87) const float VC16 = 0.0;
layout(constant_id = 88) const float VC17 = 0.0;
layout(constant_id = 89) const float VC18 = 0.0;
layout(constant_id = 90) const float VC19 = 0.0;
layout(constant_id = 91) const float VC20 = 0.0;
layout(constant_id = 92) const float VC21 = 0.0;
layout(constant_id = 93) const float VC22 = 0.0;
layout(constant_id = 94) const float VC23 = 0.0;
layout(constant_id = 95) const float VC24 = 0.0;
layout(constant_id = 96) const float VC25 = 0.0;
layout(constant_id = 97) const float VC26 = 0.0;
layout(constant_id = 98) const float VC27 = 0.0;
layout(constant_id = 99) const float VC28 = 0.0;
layout(constant_id = 100) const float VC29 = 0.0;
layout(constant_id = 101) const float VC30 = 0.0;
layout(constant_id = 102) const float VC31 = 0.0;
layout(constant_id = 103) const float VC32 = 0.0;
layout(constant_id = 104) const float VC33 = 0.0;
layout(constant_id = 105) const float VC34 = 0.0;
layout(constant_id = 106) const float VC35 = 0.0;
layout(constant_id = 107) const float VC36 = 0.0;
layout(constant_id = 108) const float VC37 = 0.0;
layout(constant_id = 109) const float VC38 = 0.0;
layout(constant_id = 110) const float VC39 = 0.0;
layout(constant_id = 111) const float VC40 = 0.0;
layout(constant_id = 112) const float VC41 = 0.0;
layout(constant_id = 113) const float VC42 = 0.0;
layout(constant_id = 114) const float VC43 = 0.0;
layout(constant_id = 115) const float VC44 = 0.0;
layout(constant_id = 116) const float VC45 = 0.0;
layout(constant_id = 117) const float VC46 = 0.0;
layout(constant_id = 118) const float VC47 = 0.0;
layout(constant_id = 119) const float VC48 = 0.0;
layout(constant_id = 120) const float VC49 = 0.0;
layout(constant_id = 121) const float VC50 = 0.0;
layout(constant_id = 122) const float VC51 = 0.0;
layout(constant_id = 123) const float VC52 = 0.0;
layout(constant_id = 124) const float VC53 = 0.0;
layout(constant_id = 125) const float VC54 = 0.0;
layout(constant_id = 126) const float VC55 = 0.0;
layout(constant_id = 127) const float VC56 = 0.0;
layout(constant_id = 128) const float VC57 = 0.0;
layout(constant_id = 129) const float VC58 = 0.0;
layout(constant_id = 130) const float VC59 = 0.0;
layout(constant_id = 131) const float VC60 = 0.0;
layout(constant_id = 132) const float VC61 = 0.0;
layout(constant_id = 133) const float VC62 = 0.0;
layout(constant_id = 134) const float VC63 = 0.0;

// Levels of a codebook codec's codebook (16 for every other codec). The
// private arrays below are sized by the pipeline's codecs: lavapipe compiles
// a run-time index into a private array to a pick over every entry, and
// 64-entry arrays in every codec pipeline made the cold (no shader cache) run
// of KvCodecTest.EncodeMatchesTheCpuSchemes take 107 s instead of 23 s.
const uint K_LEVELS = K_CODEC == KVS_CODEC_TURBO6B ? 64u : K_CODEC == KVS_CODEC_TURBO5B ? 32u : 16u;
const uint V_LEVELS = V_CODEC == KVS_CODEC_TURBO6B ? 64u : V_CODEC == KVS_CODEC_TURBO5B ? 32u : 16u;

// The codebooks, indexed by code. glslang takes no array-valued
// specialization constants, so main() copies them into these private arrays
// once (initCodebooks) rather than building an array value at every call.
float kCodebook[K_LEVELS], vCodebook[V_LEVELS];
void initCodebooks() {
  const float kAll[KVS_CODEBOOK_SIZE] = float[](
      KC0, KC1, KC2, KC3, KC4, KC5, KC6, KC7, KC8, KC9,
      KC10, KC11, KC12, KC13, KC14, KC15, KC16, KC17, KC18, KC19,
      KC20, KC21, KC22, KC23, KC24, KC25, KC26, KC27, KC28, KC29,
      KC30, KC31, KC32, KC33, KC34, KC35, KC36, KC37, KC38, KC39,
      KC40, KC41, KC42, KC43, KC44, KC45, KC46, KC47, KC48, KC49,
      KC50, KC51, KC52, KC53, KC54, KC55, KC56, KC57, KC58, KC59,
      KC60, KC61, KC62, KC63);
  const float vAll[KVS_CODEBOOK_SIZE] = float[](
      VC0, VC1, VC2, VC3, VC4, VC5, VC6, VC7, VC8, VC9,
      VC10, VC11, VC12, VC13, VC14, VC15, VC16, VC17, VC18, VC19,
      VC20, VC21, VC22, VC23, VC24, VC25, VC26, VC27, VC28, VC29,
      VC30, VC31, VC32, VC33, VC34, VC35, VC36, VC37, VC38, VC39,
      VC40, VC41, VC42, VC43, VC44, VC45, VC46, VC47, VC48, VC49,
      VC50, VC51, VC52, VC53, VC54, VC55, VC56, VC57, VC58, VC59,
      VC60, VC61, VC62, VC63);
  for (uint i = 0u; i < K_LEVELS; ++i) kCodebook[i] = kAll[i];
  for (uint i = 0u; i < V_LEVELS; ++i) vCodebook[i] = vAll[i];
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
  if (c == KVS_CODEC_TURBO6B) return 6u;
  if (c == KVS_CODEC_TURBO5B) return 5u;
  return 4u;
}
bool codecRotated(uint c) { return c >= KVS_CODEC_TURBO4; }
bool codecHasCodebook(uint c) { return codecRotated(c) && codecPlain(c) == c; }
bool codecGrouped(uint c) { return c >= KVS_CODEC_TURBO4G && c <= KVS_CODEC_TURBO2G; }
bool codecBlockScaled(uint c) {
  return (c >= KVS_CODEC_TURBO4B && c <= KVS_CODEC_TURBO2B) || c == KVS_CODEC_TURBO6B ||
         c == KVS_CODEC_TURBO5B;
}
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
    } else if (bits >= 4u) {
      // The low nibbles; for 5 and 6 bits the high bits from the plane after
      // them, 1 bit (5) or 2 bits (6) per code.
      const uint w = rowBits(page, base, last, codes + 4u * g);
      const uint plane = codes + (HEAD_DIM + 1u) / 2u;
      const uint high = bits == 5u   ? rowBits(page, base, last, plane + g)
                        : bits == 6u ? rowBits(page, base, last, plane + 2u * g)
                                     : 0u;
      for (uint j = 0u; j < 8u; ++j) {
        const uint hi = bits == 5u ? (high >> j) & 1u : (high >> (2u * j)) & 3u;
        code[j] = ((w >> (4u * j)) & 15u) | (hi << 4u);
      }
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
