#version 450
// RMSNorm of `rows` rows of n values: y = x / sqrt(mean(x^2) + eps) * weight
// (pc.unweighted: without the weight), or with pc.accumulate y += that.
// One workgroup per row (looping when there are more rows than groups).
#include "rows.h"
#include "reduce.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float weight[]; };
layout(std430, binding = 2) buffer Y { float y[]; };

void main() {
  const uint lid = gl_LocalInvocationID.x;
  for (uint row = gl_WorkGroupID.x; row < pc.rows; row += gl_NumWorkGroups.x) {
    const uint base = row * pc.n;
    float ss = 0.0;
    for (uint i = lid; i < pc.n; i += WG) ss += x[base + i] * x[base + i];
    ss = workgroupSum(ss);
    const float inv = inversesqrt(ss / float(pc.n) + pc.param);
    for (uint i = lid; i < pc.n; i += WG) {
      float v = x[base + i] * inv;
      if (pc.unweighted == 0u) v = v * weight[i];
      y[base + i] = pc.accumulate != 0u ? y[base + i] + v : v;
    }
  }
}
