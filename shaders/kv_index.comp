#version 450
// The indexer's sidecar on the device: rebuilds the entries of sidecar pages
// firstPage .. firstPage + pages - 1 of one layer from the K rows the cache
// holds, the bytes kv::KvIndex keeps (engine/kv/kv_index.h), of either kind:
//   i8 lo[HEAD_DIM]   | i8 hi[HEAD_DIM]  | i8 e | zero padding to a word
//   i8 mean[HEAD_DIM] | i8 std[HEAD_DIM] | i8 e | zero padding (MEAN_STD)
// with e the largest of the page's row exponents (the smallest e with
// max|x| <= 127 * 2^e, in [-100, 100]). Bounds: lo / hi the per-channel
// minimum of floor(x / 2^e) and maximum of ceil(x / 2^e); KvIndex reaches the
// same bytes row by row (floor and ceil by powers of two nest exactly), so
// rebuilding a page from its rows after an append or a trim equals
// appending. One exception: an infinite key (an f16 overflow) saturates at
// +-127 here, while KvIndex coarsens its saturated code when a later row
// raises e. Mean and std: from the codes c = roundEven(x / 2^e) (non-finite
// x: 0), mean = round(sum c / n) and std = round(sqrt(n sum c^2 - (sum c)^2) / n)
// in exact integers, as KvIndex computes them.
// A workgroup loops over (page, KV head) tasks. Keys are
// read as attention reads them (kv_codec.glsl: the rotated space of a rotated
// codec), so the bounds hold for the scores attention computes.
// A task is one (page, KV head) entry; a sidecar page lies inside one KV
// page (KV pages hold a multiple of 64 rows), so the page index is uniform.
#define KVS_INDEXER
#include "attention.h"

layout(constant_id = 0) const uint WG = 64;  // >= the rows of a sidecar page
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool MEAN_STD = false;  // kv::PageScore::kMeanStd's entries
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) buffer Sidecar { uint sidecar[]; };  // [layer][page][head][entryWords]
layout(std430, binding = 1) readonly buffer Page { uint words[]; } pages[KVS_ATTENTION_MAX_PAGES];

#include "kv_codec.glsl"

const int kMinExponent = -100, kMaxExponent = 100;

shared int rowExponent[WG];
shared int first[HEAD_DIM], second[HEAD_DIM];  // lo and hi, or mean and std

// The smallest e in the limits with m <= 127 * 2^e (kv_index.cpp's exponentFor).
int exponentFor(float m) {
  if (m == 0.0) return kMinExponent;
  int e = clamp(int(ceil(log2(m / 127.0))), kMinExponent, kMaxExponent);
  while (e < kMaxExponent && ldexp(127.0, e) < m) ++e;
  while (e > kMinExponent && ldexp(127.0, e - 1) >= m) --e;
  return e;
}

// Whether x is NaN, or finite, from its bits (a driver need not preserve
// NaN and infinity in float math).
bool isNaN(float x) { return (floatBitsToUint(x) & 0x7fffffffu) > 0x7f800000u; }
bool isFinite(float x) { return (floatBitsToUint(x) & 0x7fffffffu) < 0x7f800000u; }

// x / 2^e rounded down (or up), clamped to [-127, 127]; NaN counts as 0.
int code(float x, int e, bool up) {
  if (isNaN(x)) return 0;
  const float v = ldexp(x, -e);
  return int(clamp(up ? ceil(v) : floor(v), -127.0, 127.0));
}

// x / 2^e rounded to nearest, ties to even; a non-finite x counts as 0.
int nearestCode(float x, int e) {
  if (!isFinite(x)) return 0;
  return int(clamp(roundEven(ldexp(x, -e)), -127.0, 127.0));
}

// sum / n rounded to nearest, halves away from zero.
int roundedMean(int sum, int n) {
  return sum >= 0 ? (2 * sum + n) / (2 * n) : -((-2 * sum + n) / (2 * n));
}

// sqrt(v) / n rounded to nearest, halves up: the largest s with
// n^2 (2s - 1)^2 <= 4v (v <= 64 * 64 * 127^2: every product fits 32 bits).
int roundedRootOver(uint v, uint n) {
  uint s = uint(round(sqrt(float(v)) / float(n)));
  while (s > 0u && n * n * (2u * s - 1u) * (2u * s - 1u) > 4u * v) --s;
  while (n * n * (2u * s + 1u) * (2u * s + 1u) <= 4u * v) ++s;
  return int(s);
}

void buildEntry(uint task) {
  const uint lid = gl_LocalInvocationID.x;
  const uint page = pc.firstPage + task / pc.nHeadKv;
  const uint head = task % pc.nHeadKv;
  const uint row0 = page * pc.pageRows;
  const uint count = min(pc.pageRows, pc.rows - row0);
  const uint kvPage = row0 / pc.rowsPerPage;
  const uint headBase = pc.keyOffset + head * pc.rowsPerPage * pc.keyRowWords;
  // Each row's exponent, then the page's: the largest.
  if (lid < count) {
    const uint base = headBase + (row0 + lid) % pc.rowsPerPage * pc.keyRowWords;
    float m = 0.0;
    for (uint g = 0u; g < KV_GROUPS; ++g) {
      vec2 v[4];
      decodeKey(kvPage, base, pc.keyRowWords, g, v);
      for (uint j = 0u; j < 8u; ++j) {
        const float x = v[j / 2u][j % 2u];
        if (isFinite(x)) m = max(m, abs(x));
      }
    }
    rowExponent[lid] = exponentFor(m);
  }
  barrier();
  int e = kMinExponent;
  for (uint r = 0u; r < count; ++r) e = max(e, rowExponent[r]);
  // Per channel, the bounds (or the moments) over the page's rows.
  for (uint g = lid; g < KV_GROUPS; g += WG) {
    int a[8], b[8];
    for (uint r = 0u; r < count; ++r) {
      vec2 v[4];
      decodeKey(kvPage, headBase + (row0 + r) % pc.rowsPerPage * pc.keyRowWords, pc.keyRowWords,
                g, v);
      for (uint j = 0u; j < 8u; ++j) {
        const float x = v[j / 2u][j % 2u];
        if (MEAN_STD) {
          const int c = nearestCode(x, e);
          a[j] = (r == 0u ? 0 : a[j]) + c;      // sum c
          b[j] = (r == 0u ? 0 : b[j]) + c * c;  // sum c^2
        } else {
          a[j] = r == 0u ? code(x, e, false) : min(a[j], code(x, e, false));
          b[j] = r == 0u ? code(x, e, true) : max(b[j], code(x, e, true));
        }
      }
    }
    for (uint j = 0u; j < 8u && 8u * g + j < HEAD_DIM; ++j) {
      if (MEAN_STD) {
        const int n = int(count);
        first[8u * g + j] = roundedMean(a[j], n);
        second[8u * g + j] = roundedRootOver(uint(n * b[j] - a[j] * a[j]), uint(n));
      } else {
        first[8u * g + j] = a[j];
        second[8u * g + j] = b[j];
      }
    }
  }
  barrier();
  const uint entry = pc.sidecarBase + (page * pc.nHeadKv + head) * pc.entryWords;
  for (uint w = lid; w < pc.entryWords; w += WG) {
    uint packed = 0u;
    for (uint k = 0u; k < 4u; ++k) {
      const uint b = 4u * w + k;
      int value = 0;
      if (b < HEAD_DIM) {
        value = first[b];
      } else if (b < 2u * HEAD_DIM) {
        value = second[b - HEAD_DIM];
      } else if (b == 2u * HEAD_DIM) {
        value = e;
      }
      packed |= (uint(value) & 255u) << (8u * k);
    }
    sidecar[entry + w] = packed;
  }
}

void main() {
  initCodebooks();
  for (uint task = gl_WorkGroupID.x; task < pc.pages * pc.nHeadKv; task += gl_NumWorkGroups.x) {
    buildEntry(task);
    barrier();  // the next task rewrites rowExponent, first and second
  }
}
