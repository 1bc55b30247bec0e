#version 450
// A mixture-of-experts layer's output: each token's expert products summed
// with their weights in pick order (the CPU backend's order; a compiler may
// fuse a multiply-add the CPU rounds twice, so equal within rounding), written
// to `out` and, with pc.residual, added to the residual stream:
//   out[t, i] = sum_k weights[t, k] * products[t, k, i];  residual[t, i] += out[t, i]
// With pc.expertScale each product is first multiplied by its expert's scale
// (Gemma 4's ffn_down_exps.scale): products[t, k, i] * scales[ids[t, k]].
#include "moe.h"

layout(constant_id = 0) const uint WG = 256;
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Products { float products[]; };  // [n, used, width]
layout(std430, binding = 1) readonly buffer Weights { float weights[]; };    // [n, used]
layout(std430, binding = 2) writeonly buffer Out { float outs[]; };          // [n, width]
layout(std430, binding = 3) buffer Residual { float residual[]; };           // [n, width]
layout(std430, binding = 4) readonly buffer Ids { uint ids[]; };             // [n, used]
layout(std430, binding = 5) readonly buffer Scales { float scales[]; };      // [experts]

float product(uint pair, uint i) {
  const float v = products[pair * pc.width + i];
  return pc.expertScale != 0u ? v * scales[ids[pair]] : v;
}

void main() {
  const uint total = pc.n * pc.width;
  for (uint g = gl_GlobalInvocationID.x; g < total; g += gl_NumWorkGroups.x * WG) {
    const uint t = g / pc.width, i = g % pc.width;
    const uint p = t * pc.used;
    float s = weights[p] * product(p, i);
    for (uint k = 1; k < pc.used; ++k) s += weights[p + k] * product(p + k, i);
    outs[g] = s;
    if (pc.residual != 0u) residual[g] += s;
  }
}
