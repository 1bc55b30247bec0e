#version 450
// RoPE in place. The angles come from a host-computed table (cos, sin) per
// token and frequency, the same float values the CPU backend uses, so both
// backends rotate identically. One invocation per (token, head, pair).
#include "rope.h"

layout(constant_id = 0) const uint WG = 256;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) buffer Data { float x[]; };
layout(std430, binding = 1) readonly buffer Table { vec2 cosSin[]; };  // [n][dims/2]

void main() {
  const uint half_ = pc.dims / 2;
  const uint total = pc.n * pc.heads * half_;
  const uint stride = gl_NumWorkGroups.x * WG;
  for (uint job = gl_GlobalInvocationID.x; job < total; job += stride) {
    const uint i = job % half_;
    const uint row = job / half_;  // token * heads + head
    const uint token = row / pc.heads;
    const uint base = row * pc.headDim;
    const uint a = base + (pc.neox != 0 ? i : 2 * i);
    const uint b = base + (pc.neox != 0 ? i + half_ : 2 * i + 1);
    const vec2 cs = cosSin[token * half_ + i];
    const float x0 = x[a], x1 = x[b];
    x[a] = x0 * cs.x - x1 * cs.y;
    x[b] = x0 * cs.y + x1 * cs.x;
  }
  if (pc.tailScale == 1.0) return;
  const uint tail = pc.headDim - pc.dims;
  for (uint job = gl_GlobalInvocationID.x; job < pc.n * pc.heads * tail; job += stride)
    x[(job / tail) * pc.headDim + pc.dims + job % tail] *= pc.tailScale;
}
