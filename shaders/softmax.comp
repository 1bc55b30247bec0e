#version 450
// Row-wise softmax of scale * x over `rows` rows of n values, max-subtracted
// for stability. In place is allowed (bind the same buffer twice).
#include "rows.h"
#include "reduce.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };

void main() {
  const uint lid = gl_LocalInvocationID.x;
  for (uint row = gl_WorkGroupID.x; row < pc.rows; row += gl_NumWorkGroups.x) {
    const uint base = row * pc.n;
    float m = -1.0 / 0.0;
    for (uint i = lid; i < pc.n; i += WG) m = max(m, pc.param * x[base + i]);
    m = workgroupMax(m);
    float sum = 0.0;
    for (uint i = lid; i < pc.n; i += WG) {
      const float e = exp(pc.param * x[base + i] - m);
      y[base + i] = e;
      sum += e;
    }
    sum = workgroupSum(sum);
    const float inv = 1.0 / sum;
    for (uint i = lid; i < pc.n; i += WG) y[base + i] *= inv;
  }
}
