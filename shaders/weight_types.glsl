// Weight decoding shared by weight_matvec.comp and weight_matmul.comp.
//
// One TYPE_* define selects the GGUF type. Quantized weights arrive in the
// repacked layout of engine/gpu/weight_kernels.h: within each row, every field
// of the row's blocks (quants, scales, ...) gathered in its own 32-byte aligned
// plane, so every load below is aligned. Float types arrive as raw GGUF rows.
//
// A row is walked in units: 8 values for F32 and 16 for F16/BF16 (32 bytes),
// one 32-value block for Q8_0, the Q4_0/Q4_1/Q5_0/Q5_1 family, IQ4_NL and
// MXFP4, 64 values for the k-quants and IQ4_XS (two sub-blocks of 32; for
// Q6_K the two 32-value quarters that share the bytes of ql: columns 128h +
// 32p + [0, 32) and the same + 64). decodeUnit() dequantizes a unit with
// ggml's arithmetic (same products, same order); chunkColumn() says which
// columns of X each chunk of CHUNK consecutive values multiplies, and
// decodeChunk() dequantizes one chunk: the GPU matvec's step, since a 64-value
// unit's values and x at once in registers slowed an H200's decode of the
// Gemma-3-4B Q4_K_M shape to 100 tok/s (122 by chunks).
//
// WIDE_LOADS (CPU devices) reads through 64-bit vectors: lavapipe executes a
// buffer load lane by lane, so the number of loads, not their width, sets the
// cost, and fewer, wider loads win.
#ifndef KVSCOPE_WEIGHT_TYPES_GLSL
#define KVSCOPE_WEIGHT_TYPES_GLSL

#include "gates.glsl"

#if defined(WIDE_LOADS)
layout(std430, binding = 0) readonly buffer W32 { u64vec4 w32[]; };
layout(std430, binding = 0) readonly buffer W16 { u64vec2 w16[]; };
layout(std430, binding = 1) readonly buffer X32 { u64vec4 x32[]; };
#else
layout(std430, binding = 0) readonly buffer W16 { uvec4 w16[]; };
layout(std430, binding = 1) readonly buffer X16 { vec4 x16[]; };
#endif
layout(std430, binding = 0) readonly buffer W4 { uint w4[]; };
layout(std430, binding = 1) readonly buffer X4 { float x4[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
layout(std430, binding = 3) readonly buffer Bias { float bias[]; };  // read with KVS_WEIGHT_BIAS

layout(constant_id = 3) const uint EPILOGUE = 0u;  // KVS_WEIGHT_* flags (weights.h)

// The value stored at y[index] for a product v of weight row `row` (an
// expert product's row within the stack, so the stacked bias is indexed alike).
float epilogue(float v, uint row, uint index) {
  if ((EPILOGUE & KVS_WEIGHT_BIAS) != 0u) v = v + bias[row];
  if ((EPILOGUE & KVS_WEIGHT_ACCUMULATE) != 0u) v = y[index] + v;
  if ((EPILOGUE & KVS_WEIGHT_SILU_GATE) != 0u) v = siluGate(y[index], v);
  if ((EPILOGUE & KVS_WEIGHT_GELU_GATE) != 0u) v = geluGate(y[index], v);
  if ((EPILOGUE & KVS_WEIGHT_SWIGLU_OAI_GATE) != 0u) v = swigluOaiGate(y[index], v);
  return v;
}

#if defined(TYPE_F32) || defined(TYPE_F16) || defined(TYPE_BF16)
#define FLOAT_WEIGHTS
#if defined(TYPE_F32)
const uint UNIT = 8;
const uint CHUNK = 8;
#else
const uint UNIT = 16;
const uint CHUNK = 16;
#endif
const uint UNITS_PER_BLOCK = 1;
#elif defined(TYPE_Q8_0) || defined(TYPE_Q4_0) || defined(TYPE_Q4_1) || defined(TYPE_Q5_0) || \
    defined(TYPE_Q5_1) || defined(TYPE_IQ4_NL) || defined(TYPE_MXFP4)
const uint UNIT = 32;
const uint CHUNK = 32;
const uint BLOCK = 32;
const uint UNITS_PER_BLOCK = 1;
#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K) || defined(TYPE_Q6_K) || defined(TYPE_IQ4_XS)
#define CHUNKS_OF_UNIT 2  // for the preprocessor: these units have a decodeChunk of their own
const uint UNIT = 64;
const uint CHUNK = 32;
const uint BLOCK = 256;
const uint UNITS_PER_BLOCK = 4;
#else
#error "define one TYPE_*"
#endif
const uint UNIT4 = UNIT / 4;       // vec4s per unit
const uint CHUNKS = UNIT / CHUNK;  // 1 or 2
const uint CHUNK8 = CHUNK / 8;     // 8-float groups of X per chunk
const uint CHUNK4 = CHUNK / 4;     // vec4s per chunk

// 32 bytes at 32-byte index i as eight little-endian words.
void load32(uint i, out uint q[8]) {
#if defined(WIDE_LOADS)
  const u64vec4 v = w32[i];
  const uvec2 a = unpack32(v.x), b = unpack32(v.y), c = unpack32(v.z), d = unpack32(v.w);
  q = uint[8](a.x, a.y, b.x, b.y, c.x, c.y, d.x, d.y);
#else
  const uvec4 a = w16[2 * i], b = w16[2 * i + 1];
  q = uint[8](a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w);
#endif
}

// 16 bytes at 16-byte index i.
uvec4 load16(uint i) {
#if defined(WIDE_LOADS)
  const u64vec2 v = w16[i];
  return uvec4(unpack32(v.x), unpack32(v.y));
#else
  return w16[i];
#endif
}

// X values 8i .. 8i + 7.
void loadX8(uint i, out vec4 a, out vec4 b) {
#if defined(WIDE_LOADS)
  const u64vec4 v = x32[i];
  a = uintBitsToFloat(uvec4(unpack32(v.x), unpack32(v.y)));
  b = uintBitsToFloat(uvec4(unpack32(v.z), unpack32(v.w)));
#else
  a = x16[2 * i];
  b = x16[2 * i + 1];
#endif
}

// fp16 number `index` of a plane of packed halves starting at word `plane`.
float halfAt(uint plane, uint index) {
  return unpackHalf2x16(w4[plane + index / 2] >> (16 * (index & 1))).x;
}

vec4 int8x4(uint q) {
  return vec4(ivec4(int(q) << 24, int(q) << 16, int(q) << 8, int(q)) >> 24);
}
// Nibbles of the four bytes of q: low (shift 0) or high (shift 4).
uvec4 nibbles(uint q, uint shift) {
  return (uvec4(q) >> (uvec4(0, 8, 16, 24) + shift)) & 0xfu;
}
// Bits [shift, shift + width) of each byte of q.
uvec4 byteBits(uint q, uint shift, uint width) {
  return (uvec4(q) >> (uvec4(0, 8, 16, 24) + shift)) & ((1u << width) - 1u);
}
uint byteAt(uvec4 v, uint i) {
  return (v[i / 4] >> (8 * (i % 4))) & 0xffu;
}
float int8At(uvec4 v, uint i) {
  return float(bitfieldExtract(int(v[i / 4]), int(8 * (i % 4)), 8));
}
// bfloat16 pairs (low half first) of two words.
vec4 bf16x4(uint a, uint b) {
  return uintBitsToFloat(uvec4(a << 16, a & 0xffff0000u, b << 16, b & 0xffff0000u));
}

#if defined(TYPE_IQ4_NL) || defined(TYPE_IQ4_XS) || defined(TYPE_MXFP4)
// A 16-entry int8 codebook packed four to a word (entry n in byte n % 4 of
// word n / 4), read with selects and a bit-field extract: an indexed constant
// array would live in memory that a GPU reads lane by lane (an H200 decoded
// an IQ4_XS 1B model at 184 tok/s that way, 340 in Q4_K).
float codebookAt(uvec4 table, uint n) {
  const uint w = n < 8u ? (n < 4u ? table.x : table.y) : (n < 12u ? table.z : table.w);
  return float(bitfieldExtract(int(w), int(8u * (n & 3u)), 8));
}
// IQ4's codebook (gguf/block_layout.h, iq4::kValues: -127 .. 113) and
// MXFP4's doubled E2M1 values (mxfp4::kDoubled; the scale is 2^(e - 128)).
#if defined(TYPE_MXFP4)
const uvec4 kCodebook = uvec4(0x03020100u, 0x0c080604u, 0xfdfeff00u, 0xf4f8fafcu);
#else
const uvec4 kCodebook = uvec4(0xbfad9881u, 0xf6eaddcfu, 0x26190d01u, 0x71594535u);
#endif
#if defined(WIDE_LOADS)
void loadCodebook(uint lid, uint invocations) {}
vec4 codebook(uvec4 n) {
  return vec4(codebookAt(kCodebook, n.x), codebookAt(kCodebook, n.y),
              codebookAt(kCodebook, n.z), codebookAt(kCodebook, n.w));
}
#else
// GPU shapes: the 16 entries as floats in shared memory, one load per value
// instead of the selects' ~10 integer operations (an H200 decoded a
// gpt-oss-shaped MXFP4 model at 487 tok/s with the table, 384-417 with the
// selects). Every invocation of the workgroup calls loadCodebook before its
// first decode; lavapipe keeps the selects (no shared memory, no barrier).
shared float codebookTable[16];
void loadCodebook(uint lid, uint invocations) {
  for (uint i = lid; i < 16u; i += invocations) codebookTable[i] = codebookAt(kCodebook, i);
  barrier();
}
vec4 codebook(uvec4 n) {
  return vec4(codebookTable[n.x], codebookTable[n.y], codebookTable[n.z], codebookTable[n.w]);
}
#endif
#else
void loadCodebook(uint lid, uint invocations) {}
#endif

#if defined(FLOAT_WEIGHTS)

// Element e (row * cols + column) of the weight matrix, any alignment.
float weightAt(uint e) {
#if defined(TYPE_F32)
  return uintBitsToFloat(w4[e]);
#elif defined(TYPE_F16)
  return unpackHalf2x16(w4[e / 2] >> (16 * (e & 1))).x;
#else
  return bf16x4(w4[e / 2] >> (16 * (e & 1)), 0).x;
#endif
}

uint chunkColumn(uint u, uint c) { return UNIT * u; }

// Unit u of `row`; needs cols % UNIT == 0 (rows start 32-byte aligned).
void decodeUnit(uint row, uint u, out vec4 v[UNIT4]) {
  const uint e = row * pc.cols + UNIT * u;
#if defined(TYPE_F32)
  uint q[8];
  load32(e / 8, q);
  v[0] = uintBitsToFloat(uvec4(q[0], q[1], q[2], q[3]));
  v[1] = uintBitsToFloat(uvec4(q[4], q[5], q[6], q[7]));
#elif defined(TYPE_F16)
  uint h[8];
  load32(e / 16, h);
  for (uint i = 0; i < 4; ++i) {
    v[i] = vec4(unpackHalf2x16(h[2 * i]), unpackHalf2x16(h[2 * i + 1]));
  }
#else
  uint h[8];
  load32(e / 16, h);
  for (uint i = 0; i < 4; ++i) v[i] = bf16x4(h[2 * i], h[2 * i + 1]);
#endif
}

#else  // quantized types

uint chunkColumn(uint u, uint c) {
#if defined(TYPE_Q6_K)
  const uint sub = u % 4;  // 2 * half + pair
  return BLOCK * (u / 4) + 128 * (sub / 2) + 32 * (sub % 2) + 64 * c;
#else
  return UNIT * u + CHUNK * c;
#endif
}

#if defined(CHUNKS_OF_UNIT)
// Chunk c of unit u of `row`: values chunkColumn(u, c) + [0, 32), the
// vec4s [8c, 8c + 8) of decodeUnit. A unit's chunks share their words, so
// decodeUnit loads them twice (the second time from cache); the GPU matvec
// decodes one chunk at a time to hold half the registers.
void decodeChunk(uint row, uint u, uint c, out vec4 v[CHUNK4]) {
  const uint rw = row * pc.rowWords;  // first word of the row
  const uint b = u / UNITS_PER_BLOCK;  // block within the row
#if defined(TYPE_IQ4_XS)
  // planes: qs (128 bytes: sub-block s's 16 at 16 s, laid out as IQ4_NL's),
  // header (d, scales_h, scales_l: 8 bytes). Unit g holds sub-blocks 2g, 2g + 1.
  const uint g = u % 4, ib = 2 * g + c;
  const uvec4 q = load16(rw / 4 + b * 8 + ib);
  const uint h0 = w4[rw + pc.plane1 + 2 * b], h1 = w4[rw + pc.plane1 + 2 * b + 1];
  const uint ls = ((h1 >> (4 * ib)) & 0xfu) | (((h0 >> (16 + 2 * ib)) & 3u) << 4);
  const float dl = unpackHalf2x16(h0).x * float(int(ls) - 32);
  for (uint i = 0; i < 4; ++i) {
    v[i] = codebook(nibbles(q[i], 0)) * dl;
    v[i + 4] = codebook(nibbles(q[i], 4)) * dl;
  }
#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
  // planes: qs (128 bytes), [Q5_K: qh (32 bytes)], header (d, dmin, 12 scale
  // bytes). Chunk c of unit g is sub-block j = 2g + c: the low (c = 0) or
  // high nibbles of the unit's 32 quant bytes [, bit j of each qh byte].
  const uint g = u % 4, j = 2 * g + c;
  uint q[8];
  load32(rw / 8 + b * 4 + g, q);
#if defined(TYPE_Q5_K)
  uint qh[8];
  load32((rw + pc.plane1) / 8 + b, qh);
  const uvec4 hdr = load16((rw + pc.plane2) / 4 + b);
#else
  const uvec4 hdr = load16((rw + pc.plane1) / 4 + b);
#endif
  // Sub-block j's 6-bit (scale, min) in bytes 4..15 of the header (see block_layout.h).
  uint sc, m;
  if (j < 4) {
    sc = byteAt(hdr, 4 + j) & 63u;
    m = byteAt(hdr, 8 + j) & 63u;
  } else {
    sc = (byteAt(hdr, 8 + j) & 0xfu) | ((byteAt(hdr, j) >> 6) << 4);
    m = (byteAt(hdr, 8 + j) >> 4) | ((byteAt(hdr, 4 + j) >> 6) << 4);
  }
  const vec2 dm = unpackHalf2x16(hdr.x);
  const float d = dm.x * float(sc), n = dm.y * float(m);
  for (uint i = 0; i < 8; ++i) {
#if defined(TYPE_Q5_K)
    const uvec4 val = nibbles(q[i], 4 * c) | (byteBits(qh[i], j, 1) << 4);
#else
    const uvec4 val = nibbles(q[i], 4 * c);
#endif
    v[i] = d * vec4(val) - n;
  }
#elif defined(TYPE_Q6_K)
  // planes: ql (128 bytes), qh (64 bytes), scales (16 x int8), d (fp16).
  // Unit (h, p) holds quarters p (chunk 0: low nibbles of ql, qh bits 2p)
  // and p + 2 (chunk 1: high nibbles, qh bits 2p + 4) of half h.
  const uint sub = u % 4, h = sub / 2, p = sub % 2;
  uint ql[8], qh[8];
  load32(rw / 8 + b * 4 + sub, ql);  // ql bytes 64h + 32p + [0, 32)
  load32((rw + pc.plane1) / 8 + b * 2 + h, qh);
  const uvec4 sc = load16((rw + pc.plane2) / 4 + b);
  const float d = halfAt(rw + pc.plane3, b);
  // Scales of the chunk's values 0..15 and 16..31.
  const uint s = 8 * h + 2 * p + 4 * c;
  const float a0 = d * int8At(sc, s), a1 = d * int8At(sc, s + 1);
  for (uint i = 0; i < 8; ++i) {
    const ivec4 val = ivec4(nibbles(ql[i], 4 * c) | (byteBits(qh[i], 2 * p + 4 * c, 2) << 4)) - 32;
    v[i] = (i < 4 ? a0 : a1) * vec4(val);
  }
#endif
}
#endif

void decodeUnit(uint row, uint u, out vec4 v[UNIT4]) {
  const uint rw = row * pc.rowWords;  // first word of the row
  const uint b = u / UNITS_PER_BLOCK;  // block within the row
#if defined(TYPE_Q8_0)
  // planes: qs (32 bytes), d (fp16)
  uint q[8];
  load32(rw / 8 + b, q);
  const float d = halfAt(rw + pc.plane1, b);
  for (uint i = 0; i < 8; ++i) v[i] = int8x4(q[i]) * d;
#elif defined(TYPE_Q4_0)
  // planes: qs (16 bytes: value j in the low nibble of byte j, j + 16 in the high), d
  const uvec4 q = load16(rw / 4 + b);
  const float d = halfAt(rw + pc.plane1, b);
  for (uint i = 0; i < 4; ++i) {
    v[i] = (vec4(nibbles(q[i], 0)) - 8.0) * d;
    v[i + 4] = (vec4(nibbles(q[i], 4)) - 8.0) * d;
  }
#elif defined(TYPE_Q4_1)
  // planes: qs (as Q4_0), d, m: value = q * d + m
  const uvec4 q = load16(rw / 4 + b);
  const float d = halfAt(rw + pc.plane1, b), m = halfAt(rw + pc.plane2, b);
  for (uint i = 0; i < 4; ++i) {
    v[i] = vec4(nibbles(q[i], 0)) * d + m;
    v[i + 4] = vec4(nibbles(q[i], 4)) * d + m;
  }
#elif defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
  // planes: qs (as Q4_0), qh (32 fifth bits: bit j for value j), d [, m]:
  // Q5_0 value = (q - 16) * d, Q5_1 value = q * d + m
  const uvec4 q = load16(rw / 4 + b);
  const uint qh = w4[rw + pc.plane1 + b];
  const float d = halfAt(rw + pc.plane2, b);
#if defined(TYPE_Q5_1)
  const float m = halfAt(rw + pc.plane3, b);
#endif
  for (uint i = 0; i < 4; ++i) {
    const uvec4 bit = uvec4(0, 1, 2, 3) + 4 * i;
    const uvec4 lo = nibbles(q[i], 0) | (((uvec4(qh) >> bit) & 1u) << 4);
    const uvec4 hi = nibbles(q[i], 4) | (((uvec4(qh) >> (bit + 16u)) & 1u) << 4);
#if defined(TYPE_Q5_0)
    v[i] = (vec4(lo) - 16.0) * d;
    v[i + 4] = (vec4(hi) - 16.0) * d;
#else
    v[i] = vec4(lo) * d + m;
    v[i + 4] = vec4(hi) * d + m;
#endif
  }
#elif defined(TYPE_IQ4_NL) || defined(TYPE_MXFP4)
  // planes: qs (as Q4_0, codebook indices), IQ4_NL: d (fp16) / MXFP4: e (E8M0 byte)
  const uvec4 q = load16(rw / 4 + b);
#if defined(TYPE_IQ4_NL)
  const float d = halfAt(rw + pc.plane1, b);
#else
  const uint e = (w4[rw + pc.plane1 + b / 4] >> (8 * (b % 4))) & 0xffu;
  const float d = ldexp(1.0, int(e) - 128);
#endif
  for (uint i = 0; i < 4; ++i) {
    v[i] = codebook(nibbles(q[i], 0)) * d;
    v[i + 4] = codebook(nibbles(q[i], 4)) * d;
  }
#else
  // The two-chunk types: their chunks (decodeChunk above).
  vec4 lo[CHUNK4], hi[CHUNK4];
  decodeChunk(row, u, 0, lo);
  decodeChunk(row, u, 1, hi);
  for (uint i = 0; i < CHUNK4; ++i) {
    v[i] = lo[i];
    v[CHUNK4 + i] = hi[i];
  }
#endif
}

#if !defined(CHUNKS_OF_UNIT)
// One-chunk units: the chunk is the unit.
void decodeChunk(uint row, uint u, uint c, out vec4 v[CHUNK4]) { decodeUnit(row, u, v); }
#endif

#endif  // FLOAT_WEIGHTS

#endif
