#version 450
// y = W x for a row-major W[rows, cols]. Each workgroup loops over rows
// (row = group, group + numGroups, ...) so the host can launch a few large
// workgroups on CPU devices and one per row on GPUs; the invocations of a
// workgroup stride over the columns and reduce through shared memory.
// Variants: WEIGHT_F32, WEIGHT_F16 (fp16 packed two per uint, any cols).
#include "matvec.h"
#include "reduce.glsl"

#if defined(WEIGHT_F16)
layout(std430, binding = 0) readonly buffer Weights { uint w[]; };
float weight(uint e) { return unpackHalf2x16(w[e >> 1])[e & 1]; }
#else
layout(std430, binding = 0) readonly buffer Weights { float w[]; };
float weight(uint e) { return w[e]; }
#endif
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

void main() {
  const uint lid = gl_LocalInvocationID.x;
  for (uint row = gl_WorkGroupID.x; row < pc.rows; row += gl_NumWorkGroups.x) {
    const uint base = row * pc.cols;
    float acc = 0.0;
    for (uint k = lid; k < pc.cols; k += WG) acc += weight(base + k) * x[k];
    acc = workgroupSum(acc);
    if (lid == 0) y[row] = acc;
  }
}
