#version 450
// dst[i] += src[i % period]: a residual add (period = n) or a bias broadcast
// over rows (period = row width), in one kernel.
#include "add.h"

layout(constant_id = 0) const uint WG = 256;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) buffer Dst { float dst[]; };
layout(std430, binding = 1) readonly buffer Src { float src[]; };

void main() {
  const uint stride = gl_NumWorkGroups.x * WG;
  for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += stride) dst[i] += src[i % pc.period];
}
