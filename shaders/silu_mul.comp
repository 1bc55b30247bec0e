#version 450
// SwiGLU gate: out = silu(gate) * up, with silu(g) = g / (1 + exp(-g)).
#include "elementwise.h"

layout(constant_id = 0) const uint WG = 256;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer Gate { float gate[]; };
layout(std430, binding = 1) readonly buffer Up { float up[]; };
layout(std430, binding = 2) writeonly buffer Out { float dst[]; };

void main() {
  const uint stride = gl_NumWorkGroups.x * WG;
  for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += stride) {
    const float g = gate[i];
    dst[i] = g / (1.0 + exp(-g)) * up[i];
  }
}
