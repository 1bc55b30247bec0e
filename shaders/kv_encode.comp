#version 450
#extension GL_EXT_control_flow_attributes : require
// Encodes the K or V rows (pc.part) of n new tokens of one layer into the
// paged KV cache with the part's codec (kv_codec.glsl ids; the codec and its
// codebook are K's specialization constants whichever part is encoded), producing the bytes of the kv scheme of the same name
// (engine/kv/scheme_*.cpp, whose arithmetic this mirrors step by step).
// Two launch shapes, one arithmetic:
//  - CPU devices: workgroup t encodes token t into row pos0 + t, each
//    invocation a whole row (one KV head): it builds the row's words, then
//    stores them. One workgroup per token on purpose: on lavapipe (Mesa 22.3)
//    a version whose workgroups looped over tokens, and so over pages, lost
//    the stores of a few rows per large batch, nondeterministically (cause
//    not pinned down).
//  - GPUs (ROW_GROUPS): workgroup (head, t) encodes one row. Its invocations
//    stage the row in shared memory, score the scale candidates (turbo*b, q8_0r) of all
//    blocks at once (a block and candidate each: the serial search cost
//    milliseconds a decode step on an H200) and compute the codes of the
//    codebook (turbo) codecs one value each; one invocation then packs and stores the
//    row from shared memory. Every sum runs in the same order as in the CPU
//    shape, so both shapes store the same bytes.
//
// Rotated codecs read y = R x from `rotated` (kv_rotate.comp ran first): the
// rotated block formats encode it with their plain format's steps; the turbo
// codecs read x itself for the norm; the CPU takes the norms in double (and R x of a
// non-power-of-two row), so a code can differ by one step where u sits on a
// decision boundary to within float rounding, and gamma by one fp16 step
// (tests/gpu/kv_codec_test.cpp). The block-scaled turbo*b and q8_0r repeat the CPU's
// float32 steps, but the device's y can differ in its last bits (a dense
// rotation is float32 here, double on the CPU), a compiler may fuse a
// multiply-add of the error sums, and GLSL's sqrt and division need not be
// correctly rounded: where two scale candidates' errors are that close the
// device may keep the other one, of an error equal to within rounding.
// The other codecs reproduce the CPU bytes exactly where the device divides
// with correct rounding (lavapipe does).
#define KVS_KV_WRITE
#include "attention.h"
#include "attention_f16.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(local_size_x_id = 0) in;

// Bits of the float32 inputs, so that no device flushes a subnormal on load.
layout(std430, binding = 0) readonly buffer X { uint x[]; };          // [n][nHeadKv][headDim]
layout(std430, binding = 1) readonly buffer XRot { float xRot[]; };  // R x, for rotated codecs
layout(std430, binding = 2) buffer Page { uint words[]; } pages[KVS_ATTENTION_MAX_PAGES];

#include "kv_codec.glsl"

#define CODEC K_CODEC

// The row being built, stored to the page with one loop at the end. The
// largest row is f16's 2 * HEAD_DIM bytes (affine4's for tiny HEAD_DIM).
const uint ROW_WORDS_MAX = (2u * HEAD_DIM + 4u * ((HEAD_DIM + 31u) / 32u) + 3u) / 4u;
uint rowOut[ROW_WORDS_MAX];
uint rowBytes;  // bytes built so far

void putByte(uint b) {
  const uint w = rowBytes / 4u, shift = 8u * (rowBytes % 4u);
  rowOut[w] = (shift == 0u ? 0u : rowOut[w]) | ((b & 255u) << shift);
  ++rowBytes;
}
void putHalf(float x) {
  const uint h = halfBits(floatBitsToUint(x));
  putByte(h);
  putByte(h >> 8u);
}

uint srcBase;  // first input value of the row

#if defined(ROW_GROUPS)
shared uint stagedBits[HEAD_DIM];     // the row's float32 bits
shared float stagedRotated[HEAD_DIM];  // R x, for rotated codecs
shared uint stagedCodes[HEAD_DIM];     // rotated codecs: the code of each value
shared float candidateError[KV_BLOCKS * 16u], candidateScale[KV_BLOCKS * 16u];  // turbo*b
shared float stagedScales[KV_BLOCKS];  // turbo*b: the scale chosen per block
uint valueBits(uint i) { return stagedBits[i]; }
float rotatedValue(uint i) { return stagedRotated[i]; }
#else
uint valueBits(uint i) { return x[srcBase + i]; }
float rotatedValue(uint i) { return xRot[srcBase + i]; }
#endif
// A rotated block format encodes y = R x with its plain format's arithmetic
// (CODEC is a specialization constant: the test folds away).
float value(uint i) {
  return codecPlain(CODEC) != CODEC ? rotatedValue(i) : uintBitsToFloat(valueBits(i));
}

// std::round: half away from zero.
float roundAway(float x) {
  const float a = abs(x), t = trunc(a);
  return sign(x) * (a - t >= 0.5 ? t + 1.0 : t);
}

uint blockEnd(uint b) { return min(HEAD_DIM, 32u * b + 32u); }

float blockAbsMax(uint b) {
  float amax = 0.0;
  for (uint i = 32u * b; i < blockEnd(b); ++i) amax = max(amax, abs(value(i)));
  return amax;
}

// kvscope::floatToUe8m0Ceil: the smallest power of two >= f, as a biased byte.
uint ue8m0Ceil(float f) {
  int e;
  const float m = frexp(f, e);
  const int p = (m == 0.5 ? e - 1 : e) + 127;
  return uint(clamp(p, 0, 254));
}

// kvscope::floatToE4m3: round to nearest even, saturating to +-448.
uint e4m3Bits(float f) {
  if (isnan(f)) return 0x7fu;
  const uint sgn = (floatBitsToUint(f) >> 24u) & 0x80u;
  const float a = abs(f);
  if (a >= 448.0) return sgn | 0x7eu;
  if (a < 1.0 / 64.0) return sgn | uint(roundEven(a * 512.0));
  int e;
  const float m = frexp(a, e);
  float kq = roundEven((m * 2.0 - 1.0) * 8.0);
  int ex = e - 1 + 7;
  if (kq >= 8.0) {
    kq = 0.0;
    ++ex;
  }
  if (ex > 15 || (ex == 15 && kq > 6.0)) return sgn | 0x7eu;
  return sgn | (uint(ex) << 3u) | uint(kq);
}

void encodeQ8_0() {
  for (uint b = 0u; b < KV_BLOCKS; ++b) putHalf(blockAbsMax(b) / 127.0);
  for (uint b = 0u; b < KV_BLOCKS; ++b) {
    const float s = blockAbsMax(b) / 127.0;
    for (uint i = 32u * b; i < blockEnd(b); ++i) {
      putByte(s != 0.0 ? uint(int(roundAway(value(i) / s))) : 0u);
    }
  }
}

// Nibbles of consecutive codes: code 2i low, 2i + 1 high; a missing odd tail is 0.
uint nibbleByte(uint lo, uint hi) { return lo | (hi << 4u); }

float q4Scale(uint b) {
  float m = 0.0;
  for (uint i = 32u * b; i < blockEnd(b); ++i) {
    if (abs(value(i)) > abs(m)) m = value(i);
  }
  return m / -8.0;
}
uint q4Code(float x, float s) { return s != 0.0 ? uint(min(15, int(x / s + 8.5))) : 8u; }

void encodeQ4_0() {
  for (uint b = 0u; b < KV_BLOCKS; ++b) putHalf(q4Scale(b));
  for (uint i = 0u; i < HEAD_DIM; i += 2u) {
    const float s = q4Scale(i / 32u);
    const uint hi = i + 1u < HEAD_DIM ? q4Code(value(i + 1u), s) : 0u;
    putByte(nibbleByte(q4Code(value(i), s), hi));
  }
}

void encodeFp8() {
  for (uint b = 0u; b < KV_BLOCKS; ++b) {
    const float amax = blockAbsMax(b);
    putByte(amax > 0.0 ? ue8m0Ceil(amax / 448.0) : 127u);
  }
  for (uint b = 0u; b < KV_BLOCKS; ++b) {
    const float amax = blockAbsMax(b);
    const int e = int(amax > 0.0 ? ue8m0Ceil(amax / 448.0) : 127u) - 127;
    for (uint i = 32u * b; i < blockEnd(b); ++i) putByte(e4m3Bits(ldexp(value(i), -e)));
  }
}

// The fp16-rounded block minimum and step of affine4.
vec2 affineParams(uint b) {
  float lo = value(32u * b), hi = lo;
  for (uint i = 32u * b + 1u; i < blockEnd(b); ++i) {
    lo = min(lo, value(i));
    hi = max(hi, value(i));
  }
  return vec2(roundToHalf(lo), roundToHalf((hi - lo) / 15.0));
}
uint affineCode(float x, vec2 p) {
  return p.y != 0.0 ? uint(clamp(roundAway((x - p.x) / p.y), 0.0, 15.0)) : 0u;
}

void encodeAffine4() {
  for (uint b = 0u; b < KV_BLOCKS; ++b) putHalf(affineParams(b).x);
  for (uint b = 0u; b < KV_BLOCKS; ++b) putHalf(affineParams(b).y);
  for (uint i = 0u; i < HEAD_DIM; i += 2u) {
    const vec2 p = affineParams(i / 32u);
    const uint hi = i + 1u < HEAD_DIM ? affineCode(value(i + 1u), p) : 0u;
    putByte(nibbleByte(affineCode(value(i), p), hi));
  }
}

void encodeF16() {
  for (uint i = 0u; i < HEAD_DIM; ++i) {
    const uint h = halfBits(valueBits(i));
    putByte(h);
    putByte(h >> 8u);
  }
}

// Loop iterations: llvmpipe (lavapipe) ends a shader's loops after 65535
// iterations in all, silently, so the innermost loops of the turbo*b search
// (16 candidates x 32 values x 15 midpoints per block) are unrolled, and
// above 16 levels the bisection; what still loops (blocks, candidates, a
// block's sums, above 16 levels a block's values) stays far below that.

// Turbo: the code of u, the number of midpoints strictly below it: counted
// up to 16 levels, by an unrolled bisection above (as the CPU's lower_bound:
// a NaN u is below every midpoint). Neither loops at run time.
uint midpointCode(uint levels, float u) {
  uint code = 0u;
  if (levels <= 16u) {
    [[unroll]] for (uint j = 0u; j + 1u < 16u; ++j) {
      code += j + 1u < levels && 0.5 * (kCodebook[j] + kCodebook[j + 1u]) < u ? 1u : 0u;
    }
    return code;
  }
  uint hi = levels - 1u;  // the answer lies in [code, hi]
  [[unroll]] for (uint step = 0u; step < 6u; ++step) {
    if (code < hi) {
      const uint mid = (code + hi) / 2u;
      if (0.5 * (kCodebook[mid] + kCodebook[mid + 1u]) < u) {
        code = mid + 1u;
      } else {
        hi = mid;
      }
    }
  }
  return code;
}
uint scaledCode(uint levels, float y, float s) { return midpointCode(levels, s > 0.0 ? y / s : 0.0); }

// The block-scaled searches: turbo*b's over its codebook (levels = 4 .. 64)
// and q8_0r's over the int8 grid -127 .. 127 (levels = Q8_GRID), by one rule
// (kv::TurboScheme::blockScale, kv::Q8Scale::kSearched): least error over 16
// scale candidates, the first on a tie, then one least-squares step.
const uint Q8_GRID = 0u;
// turbo*b's candidates, multiples of the block's rms (kv::kTurboBlockSteps).
const float kBlockSteps[16] = float[](0.70, 0.74, 0.78, 0.82, 0.86, 0.90, 0.94, 0.98, 1.02, 1.06,
                                      1.10, 1.14, 1.18, 1.22, 1.26, 1.30);
// q8_0r's, multiples of amax / 127 (kv::kQ8BlockSteps).
const float kQ8Steps[16] = float[](1.000, 1.006, 1.012, 1.018, 1.024, 1.030, 1.036, 1.042, 1.048,
                                   1.054, 1.060, 1.066, 1.072, 1.078, 1.084, 1.090);

// q8_0r's code of y under scale s: std::round, clamped (0 when s <= 0).
float q8Code(float y, float s) { return s > 0.0 ? clamp(roundAway(y / s), -127.0, 127.0) : 0.0; }

// What y coded under scale s decodes to, over 1: a codebook entry or an int8.
float gridValue(uint levels, float y, float s) {
  return levels == Q8_GRID ? q8Code(y, s) : kCodebook[scaledCode(levels, y, s)];
}

// The squared error of block b coded under scale s.
float valueError(uint levels, uint i, float s) {
  const float y = rotatedValue(i), r = y - s * gridValue(levels, y, s);
  return r * r;
}
float blockError(uint levels, uint b, float s) {
  float e = 0.0;
  if (levels > 16u) {
    // Looped, not unrolled: 32 copies of the bisection's run-time codebook
    // reads took lavapipe 5-8 s to compile per pipeline (0.5 s looped); the
    // loop runs 32 x 16 times per block, far below llvmpipe's loop limit.
    [[dont_unroll]] for (uint i = 32u * b; i < blockEnd(b); ++i) e += valueError(levels, i, s);
    return e;
  }
  [[unroll]] for (uint k = 0u; k < 32u; ++k) {
    const uint i = 32u * b + k;
    if (i < blockEnd(b)) e += valueError(levels, i, s);
  }
  return e;
}

// The quantity block b's candidates scale: turbo*b the block's root mean
// square, q8_0r its largest magnitude.
float blockMeasure(uint levels, uint b) {
  if (levels == Q8_GRID) return blockAbsMax(b);
  float sumSq = 0.0;
  for (uint i = 32u * b; i < blockEnd(b); ++i) sumSq += rotatedValue(i) * rotatedValue(i);
  return sqrt(sumSq / float(blockEnd(b) - 32u * b));
}
float candidate(uint levels, float measure, uint t) {
  return levels == Q8_GRID ? roundToHalf(measure * kQ8Steps[t] / 127.0)
                           : roundToHalf(measure * kBlockSteps[t]);
}

// Block b's scale, in the CPU's float32 order. ROW_GROUPS reads the
// candidates' errors the workgroup scored.
float blockScale(uint levels, uint b) {
#if !defined(ROW_GROUPS)
  const float measure = blockMeasure(levels, b);
#endif
  float best = 0.0, bestError = 0.0;
  [[dont_unroll]] for (uint t = 0u; t < 16u; ++t) {
#if defined(ROW_GROUPS)
    const float s = candidateScale[16u * b + t], e = candidateError[16u * b + t];
#else
    const float s = candidate(levels, measure, t), e = blockError(levels, b, s);
#endif
    if (t == 0u || e < bestError) {
      best = s;
      bestError = e;
    }
  }
  float num = 0.0, den = 0.0;
  for (uint i = 32u * b; i < blockEnd(b); ++i) {
    const float y = rotatedValue(i), cv = gridValue(levels, y, best);
    num += y * cv;
    den += cv * cv;
  }
  if (den > 0.0) {
    const float s = roundToHalf(num / den);
    if (blockError(levels, b, s) < bestError) best = s;
  }
  return best;
}

// q8_0r: q8_0's bytes with each block's searched scale.
void encodeQ8_0Searched() {
  float scales[16];  // kv::kMaxKvDim / 32 blocks at most
  [[dont_unroll]] for (uint b = 0u; b < KV_BLOCKS; ++b) {
#if defined(ROW_GROUPS)
    scales[b] = stagedScales[b];
#else
    scales[b] = blockScale(Q8_GRID, b);
#endif
    putHalf(scales[b]);
  }
  for (uint i = 0u; i < HEAD_DIM; ++i) putByte(uint(int(q8Code(rotatedValue(i), scales[i / 32u]))));
}

// The divisor of rotated coordinate i: ||x|| for turbo and turbo*g, the
// block's scale for turbo*b.
float turboNorm;
bool turboBlocks;
// turbo*b: the scales chosen, as floats (already fp16 values; not read back
// from the stored halves, which a device may flush when subnormal).
float blockScales[16];  // kv::kMaxKvDim / 32 blocks at most
uint turboCode(uint levels, uint i) {
#if defined(ROW_GROUPS)
  return stagedCodes[i];
#else
  return scaledCode(levels, rotatedValue(i), turboBlocks ? blockScales[i / 32u] : turboNorm);
#endif
}

// The divisor of the plain and grouped turbo codecs: ||x||, summed in order.
float rowNorm() {
  float sumSq = 0.0;
  for (uint i = 0u; i < HEAD_DIM; ++i) sumSq += value(i) * value(i);
  return sqrt(sumSq);
}

void encodeTurbo(uint c) {
  const uint bits = codecBits(c), levels = 1u << bits;
  turboBlocks = codecBlockScaled(c);
  if (turboBlocks) {
    [[dont_unroll]] for (uint b = 0u; b < KV_BLOCKS; ++b) {
#if defined(ROW_GROUPS)
      blockScales[b] = stagedScales[b];
#else
      blockScales[b] = blockScale(levels, b);
#endif
      putHalf(blockScales[b]);
    }
  } else {
    turboNorm = rowNorm();
    const uint width = codecScaleWidth(c);
    for (uint g = 0u; g < (HEAD_DIM + width - 1u) / width; ++g) {
      float ySq = 0.0, cSq = 0.0;
      for (uint i = g * width; i < min(HEAD_DIM, g * width + width); ++i) {
        const float y = rotatedValue(i), cv = kCodebook[turboCode(levels, i)];
        ySq += y * y;
        cSq += cv * cv;
      }
      const float target = codecGrouped(c) ? sqrt(ySq) : turboNorm;
      putHalf(cSq > 0.0 && target > 0.0 ? target / sqrt(cSq) : 0.0);
    }
  }
  if (bits >= 4u) {
    // Nibbles of the low 4 bits; for 5 and 6 bits then the plane of the high
    // bits: code 8i + j in bit j (5), code 4i + j in bits 2j (6).
    for (uint i = 0u; i < HEAD_DIM; i += 2u) {
      const uint hi = i + 1u < HEAD_DIM ? turboCode(levels, i + 1u) & 15u : 0u;
      putByte(nibbleByte(turboCode(levels, i) & 15u, hi));
    }
    if (bits == 5u) {
      for (uint i = 0u; i < HEAD_DIM; i += 8u) {
        uint b = 0u;
        for (uint j = 0u; j < 8u && i + j < HEAD_DIM; ++j) {
          b |= (turboCode(levels, i + j) >> 4u) << j;
        }
        putByte(b);
      }
    } else if (bits == 6u) {
      for (uint i = 0u; i < HEAD_DIM; i += 4u) {
        uint b = 0u;
        for (uint j = 0u; j < 4u && i + j < HEAD_DIM; ++j) {
          b |= (turboCode(levels, i + j) >> 4u) << (2u * j);
        }
        putByte(b);
      }
    }
    return;
  }
  // 2-bit codes, or the low-bit plane of 3-bit ones: code 4i + j in bits 2j.
  for (uint i = 0u; i < HEAD_DIM; i += 4u) {
    uint b = 0u;
    for (uint j = 0u; j < 4u && i + j < HEAD_DIM; ++j) b |= (turboCode(levels, i + j) & 3u) << (2u * j);
    putByte(b);
  }
  if (bits == 3u) {  // the high-bit plane: code 8i + j in bit j
    for (uint i = 0u; i < HEAD_DIM; i += 8u) {
      uint b = 0u;
      for (uint j = 0u; j < 8u && i + j < HEAD_DIM; ++j) b |= (turboCode(levels, i + j) >> 2u) << j;
      putByte(b);
    }
  }
}

// The codecs whose encoding is their plain format's (on y for the rotated
// block formats other than q8_0r) or turbo's, into rowOut.
void encodePlainOrTurbo(uint c) {
  if (c == KVS_CODEC_F16) {
    encodeF16();
  } else if (c == KVS_CODEC_Q8_0) {
    encodeQ8_0();
  } else if (c == KVS_CODEC_Q4_0) {
    encodeQ4_0();
  } else if (c == KVS_CODEC_FP8) {
    encodeFp8();
  } else if (c == KVS_CODEC_AFFINE4) {
    encodeAffine4();
  } else {
    encodeTurbo(c);
  }
}

// Encodes the row into rowOut and stores its words (the last one zero-padded)
// from word `dst` of `page`.
void encodeRow(uint c, uint page, uint dst) {
  rowBytes = 0u;
  if (c == KVS_CODEC_Q8_0R) {
    encodeQ8_0Searched();
  } else {
    encodePlainOrTurbo(codecPlain(c));
  }
  for (uint w = 0u; w < (rowBytes + 3u) / 4u; ++w) pages[page].words[dst + w] = rowOut[w];
}

#if defined(ROW_GROUPS)
// The parallel steps of the row's encoding, into shared memory: the row, the
// scale searches of turbo*b and q8_0r, and for the turbo codecs the codes.
void stageRow() {
  const uint lid = gl_LocalInvocationID.x;
  const bool rotated = codecRotated(CODEC);
  for (uint i = lid; i < HEAD_DIM; i += WG) {
    stagedBits[i] = x[srcBase + i];
    if (rotated) stagedRotated[i] = xRot[srcBase + i];
  }
  barrier();
  const bool q8 = CODEC == KVS_CODEC_Q8_0R;
  if (!codecHasCodebook(CODEC) && !q8) return;
  const uint levels = q8 ? Q8_GRID : 1u << codecBits(CODEC);
  const bool blocks = q8 || codecBlockScaled(CODEC);
  if (blocks) {
    for (uint item = lid; item < 16u * KV_BLOCKS; item += WG) {
      const uint b = item / 16u;
      const float s = candidate(levels, blockMeasure(levels, b), item % 16u);
      candidateScale[item] = s;
      candidateError[item] = blockError(levels, b, s);
    }
    barrier();
    for (uint b = lid; b < KV_BLOCKS; b += WG) stagedScales[b] = blockScale(levels, b);
    barrier();
  }
  if (q8) return;  // its codes are one division each: encodeQ8_0Searched
  const float norm = blocks ? 0.0 : rowNorm();
  for (uint i = lid; i < HEAD_DIM; i += WG) {
    stagedCodes[i] = scaledCode(levels, rotatedValue(i), blocks ? stagedScales[i / 32u] : norm);
  }
  barrier();
}
#endif

void main() {
  initCodebooks();
  const uint rowWords = pc.part == 0u ? pc.keyRowWords : pc.valueRowWords;
  const uint block = pc.part == 0u ? pc.keyOffset : pc.valueOffset;
#if defined(ROW_GROUPS)
  const uint head = gl_WorkGroupID.x, t = gl_WorkGroupID.y, row = pc.pos0 + t;
  const uint page = KVS_PAGE_OF(row, pc.rowsPerPage), slot = row % pc.rowsPerPage;
  srcBase = (t * pc.nHeadKv + head) * HEAD_DIM;
  stageRow();
  if (gl_LocalInvocationID.x == 0u) {
    encodeRow(CODEC, page, block + (head * pc.rowsPerPage + slot) * rowWords);
  }
#else
  const uint t = gl_WorkGroupID.x, row = pc.pos0 + t;
  const uint page = KVS_PAGE_OF(row, pc.rowsPerPage), slot = row % pc.rowsPerPage;
  for (uint head = gl_LocalInvocationID.x; head < pc.nHeadKv; head += WG) {
    srcBase = (t * pc.nHeadKv + head) * HEAD_DIM;
    encodeRow(CODEC, page, block + (head * pc.rowsPerPage + slot) * rowWords);
  }
#endif
}
