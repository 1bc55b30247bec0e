#version 450
// out[r] = M in[r] (TRANSPOSE: M^T in[r]) for `count` consecutive vectors of
// HEAD_DIM floats, M the d x d row-major rotation R of a rotated KV codec
// (engine/gpu/kv_codec.h). Attention rotates the queries into K's space
// (q' = R_k q) and its output back from V's (o = R_v^T acc); the encoder
// rotates the new K and V rows (y = R x).
// A power-of-two HEAD_DIM has R = H S / sqrt(d) (kv::makeRotation: H the
// Walsh-Hadamard matrix, S the signs, which R's first row carries along with
// the norm): an invocation rotates a whole vector with the fast transform,
// d log d additions, with the float operations of kv::hadamardRotate(Back).
// Otherwise an invocation computes 4 consecutive outputs of one vector (1
// when HEAD_DIM is not a multiple of 4) from vec4 loads, in float32.
// On GPUs (SHARED_FWHT) a workgroup runs the fast transform of one vector at
// a time in shared memory, an invocation per butterfly of each stage: the
// same additions on the same pairs, so the same bits; one invocation per
// vector kept a decode step's handful of vectors on a handful of threads,
// ~10 us a dispatch on an H200.
#define KVS_KV_ROTATE
#include "attention.h"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool TRANSPOSE = false;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer In { float inv[]; };
layout(std430, binding = 0) readonly buffer In4 { vec4 in4[]; };
layout(std430, binding = 1) readonly buffer M { float m[]; };
layout(std430, binding = 1) readonly buffer M4 { vec4 m4[]; };
layout(std430, binding = 2) writeonly buffer Out { float outv[]; };
layout(std430, binding = 2) writeonly buffer Out4 { vec4 out4[]; };

const uint LANES = HEAD_DIM % 4u == 0u ? 4u : 1u;  // outputs per invocation
const uint ITEMS = HEAD_DIM / LANES;                // invocations per vector
const uint D4 = HEAD_DIM / 4u;

const bool FWHT = (HEAD_DIM & (HEAD_DIM - 1u)) == 0u;

void fastRotate() {
  const float norm = abs(m[0]);
  for (uint r = gl_GlobalInvocationID.x; r < pc.count; r += gl_NumWorkGroups.x * WG) {
    const uint x0 = r * HEAD_DIM;
    float v[HEAD_DIM];
    for (uint i = 0u; i < HEAD_DIM; ++i) v[i] = TRANSPOSE ? inv[x0 + i] : inv[x0 + i] * sign(m[i]);
    for (uint len = 1u; len < HEAD_DIM; len *= 2u) {
      for (uint i = 0u; i < HEAD_DIM; i += 2u * len) {
        for (uint j = i; j < i + len; ++j) {
          const float a = v[j], b = v[j + len];
          v[j] = a + b;
          v[j + len] = a - b;
        }
      }
    }
    for (uint i = 0u; i < HEAD_DIM; ++i)
      outv[x0 + i] = TRANSPOSE ? v[i] * (norm * sign(m[i])) : v[i] * norm;
  }
}

#if defined(SHARED_FWHT)
shared float sharedVector[HEAD_DIM];

void sharedFastRotate() {
  const uint lid = gl_LocalInvocationID.x;
  const float norm = abs(m[0]);
  for (uint r = gl_WorkGroupID.x; r < pc.count; r += gl_NumWorkGroups.x) {
    const uint x0 = r * HEAD_DIM;
    for (uint i = lid; i < HEAD_DIM; i += WG)
      sharedVector[i] = TRANSPOSE ? inv[x0 + i] : inv[x0 + i] * sign(m[i]);
    barrier();
    for (uint len = 1u; len < HEAD_DIM; len *= 2u) {
      // Butterfly p of this stage: block p / len, offset p % len in it.
      for (uint p = lid; p < HEAD_DIM / 2u; p += WG) {
        const uint j = (p / len) * 2u * len + p % len;
        const float a = sharedVector[j], b = sharedVector[j + len];
        sharedVector[j] = a + b;
        sharedVector[j + len] = a - b;
      }
      barrier();
    }
    for (uint i = lid; i < HEAD_DIM; i += WG)
      outv[x0 + i] = TRANSPOSE ? sharedVector[i] * (norm * sign(m[i])) : sharedVector[i] * norm;
    barrier();  // the next vector overwrites sharedVector
  }
}
#endif

void main() {
  if (FWHT) {
#if defined(SHARED_FWHT)
    sharedFastRotate();
#else
    fastRotate();
#endif
    return;
  }
  const uint total = pc.count * ITEMS;
  for (uint item = gl_GlobalInvocationID.x; item < total; item += gl_NumWorkGroups.x * WG) {
    const uint r = item / ITEMS, i = (item % ITEMS) * LANES, x0 = r * HEAD_DIM;
    if (LANES == 4u) {
      vec4 acc = vec4(0.0);
      if (TRANSPOSE) {
        // out_i = sum_j M[j][i] in_j: rows of M as vec4 over i.
        for (uint j = 0u; j < HEAD_DIM; ++j) acc += m4[j * D4 + i / 4u] * inv[x0 + j];
      } else {
        for (uint j = 0u; j < D4; ++j) {
          const vec4 x = in4[r * D4 + j];
          acc += vec4(dot(m4[i * D4 + j], x), dot(m4[(i + 1u) * D4 + j], x),
                      dot(m4[(i + 2u) * D4 + j], x), dot(m4[(i + 3u) * D4 + j], x));
        }
      }
      out4[(x0 + i) / 4u] = acc;
    } else {
      float acc = 0.0;
      for (uint j = 0u; j < HEAD_DIM; ++j) {
        acc += (TRANSPOSE ? m[j * HEAD_DIM + i] : m[i * HEAD_DIM + j]) * inv[x0 + j];
      }
      outv[x0 + i] = acc;
    }
  }
}
