#version 450
// y[rows] = W[rows, cols] x[cols] with W in a GGUF type (weight_types.glsl).
// Two launch shapes, picked by the host per device:
//  - WIDE_LOADS (CPU devices): each invocation owns R whole rows and walks
//    them unit by unit, loading every piece of x once for its R rows. No
//    shared memory and no barrier, both slow on lavapipe.
//  - otherwise (GPUs): a workgroup owns R rows at a time; its invocations
//    split the row into units, walk each unit chunk by chunk, and reduce
//    with subgroup arithmetic (SUBGROUP_REDUCE) or through shared memory.
// Float weights whose rows are not whole units (cols % UNIT != 0) take an
// element-wise path.
// EXPERTS: the expert products of weights.h, one pair per workgroup row z:
// the same loops, with the pair's expert's first weight row, input row and
// output row as offsets.
#if defined(WIDE_LOADS)
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#endif
#if defined(SUBGROUP_REDUCE)
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "weights.h"

#if defined(WIDE_LOADS) || defined(SUBGROUP_REDUCE)
layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
#else
#include "reduce.glsl"
#endif
layout(constant_id = 1) const uint R = 1;  // rows per invocation (CPU) or per workgroup (GPU)

#include "weight_types.glsl"

#if defined(EXPERTS)
layout(std430, binding = 4) readonly buffer Ids { uint ids[]; };  // [pairs]: the expert
#endif

// Offsets of this workgroup's product: its first weight row, its first x
// value and its first y value (all 0 outside expert products).
uint wRow0 = 0u, x0 = 0u, y0 = 0u;

#if defined(WIDE_LOADS)
// The x values that unit u of a row multiplies, in decodeUnit() order.
void loadXUnit(uint u, out vec4 xv[UNIT4]) {
  for (uint c = 0; c < CHUNKS; ++c) {
    const uint first = (x0 + chunkColumn(u, c)) / 8;
    for (uint i = 0; i < CHUNK8; ++i) {
      loadX8(first + i, xv[c * CHUNK / 4 + 2 * i], xv[c * CHUNK / 4 + 2 * i + 1]);
    }
  }
}

float dotUnit(const vec4 w[UNIT4], const vec4 xv[UNIT4]) {
  float s = 0.0;
  for (uint i = 0; i < UNIT4; ++i) s += dot(w[i], xv[i]);
  return s;
}
#elif !defined(FLOAT_WEIGHTS)
// The x values that chunk c of unit u multiplies, in decodeChunk() order.
void loadXChunk(uint u, uint c, out vec4 xv[CHUNK4]) {
  const uint first = (x0 + chunkColumn(u, c)) / 8;
  for (uint i = 0; i < CHUNK8; ++i) loadX8(first + i, xv[2 * i], xv[2 * i + 1]);
}

float dotChunk(const vec4 w[CHUNK4], const vec4 xv[CHUNK4]) {
  float s = 0.0;
  for (uint i = 0; i < CHUNK4; ++i) s += dot(w[i], xv[i]);
  return s;
}
#endif

#if defined(SUBGROUP_REDUCE)
shared float partials[WG];  // one per subgroup; WG bounds the subgroup count

float groupSum(float v) {
  v = subgroupAdd(v);
  if (gl_NumSubgroups == 1u) return v;  // uniform: the workgroup is one subgroup
  if (subgroupElect()) partials[gl_SubgroupID] = v;
  barrier();
  float total = 0.0;
  for (uint i = 0; i < gl_NumSubgroups; ++i) total += partials[i];
  barrier();  // partials are reused by the next call
  return total;
}
#elif !defined(WIDE_LOADS)
float groupSum(float v) { return workgroupSum(v); }
#endif

void main() {
#if defined(EXPERTS)
  const uint pair = gl_WorkGroupID.z;
  wRow0 = ids[pair] * pc.rows;
  x0 = pair / pc.share * pc.cols;
  y0 = pair * pc.rows;
#endif
  const uint units = pc.cols / UNIT;
  float acc[R];
  uint rows[R];
#if defined(WIDE_LOADS)
  const uint tasks = (pc.rows + R - 1) / R;
  for (uint task = gl_GlobalInvocationID.x; task < tasks; task += gl_NumWorkGroups.x * WG) {
    for (uint r = 0; r < R; ++r) {
      rows[r] = min(task * R + r, pc.rows - 1);
      acc[r] = 0.0;
    }
#if defined(FLOAT_WEIGHTS)
    if (pc.cols % UNIT != 0) {
      for (uint k = 0; k < pc.cols; ++k) {
        const float xk = x4[x0 + k];
        for (uint r = 0; r < R; ++r) acc[r] += weightAt((wRow0 + rows[r]) * pc.cols + k) * xk;
      }
    } else
#endif
    for (uint u = 0; u < units; ++u) {
      vec4 xv[UNIT4];
      loadXUnit(u, xv);
      for (uint r = 0; r < R; ++r) {
        vec4 wv[UNIT4];
        decodeUnit(wRow0 + rows[r], u, wv);
        acc[r] += dotUnit(wv, xv);
      }
    }
    for (uint r = 0; r < R; ++r) {
      const uint row = task * R + r;
      if (row < pc.rows) y[y0 + row] = epilogue(acc[r], wRow0 + row, y0 + row);
    }
  }
#else
  const uint lid = gl_LocalInvocationID.x;
  loadCodebook(lid, WG);
  for (uint first = gl_WorkGroupID.x * R; first < pc.rows; first += gl_NumWorkGroups.x * R) {
    for (uint r = 0; r < R; ++r) {
      rows[r] = min(first + r, pc.rows - 1);
      acc[r] = 0.0;
    }
#if defined(FLOAT_WEIGHTS)
    for (uint k = lid; k < pc.cols; k += WG) {
      const float xk = x4[x0 + k];
      for (uint r = 0; r < R; ++r) acc[r] += weightAt((wRow0 + rows[r]) * pc.cols + k) * xk;
    }
#else
    // A chunk (32 values) at a time: the registers hold one chunk's x and
    // weight values, not a 64-value unit's (weight_types.glsl).
    for (uint u = lid; u < units; u += WG) {
      for (uint c = 0; c < CHUNKS; ++c) {
        vec4 xv[CHUNK4];
        loadXChunk(u, c, xv);
        for (uint r = 0; r < R; ++r) {
          vec4 wv[CHUNK4];
          decodeChunk(wRow0 + rows[r], u, c, wv);
          acc[r] += dotChunk(wv, xv);
        }
      }
    }
#endif
    for (uint r = 0; r < R; ++r) {
      const float total = groupSum(acc[r]);
      const uint row = first + r;
      if (lid == 0 && row < pc.rows) y[y0 + row] = epilogue(total, wRow0 + row, y0 + row);
    }
  }
#endif
}
