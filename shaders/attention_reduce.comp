#version 450
// Sums the per-split partial outputs of attention.comp (PASS_OUT, several
// splits): out[i] = sum over s of partial[s * count + i].
#define KVS_ATTENTION_REDUCE
#include "attention.h"

layout(constant_id = 0) const uint WG = 256;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer Partial { float partial[]; };
layout(std430, binding = 1) writeonly buffer Out { float outv[]; };

void main() {
  for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += gl_NumWorkGroups.x * WG) {
    float sum = 0.0;
    for (uint s = 0u; s < pc.splits; ++s) sum += partial[s * pc.count + i];
    outv[i] = sum;
  }
}
