#version 450
// fp16 <-> fp32 conversion of n values. fp16 data is packed two per uint
// (element i in the low half of word i/2 when i is even), so any n works.
// Variants: TO_F16 (f32 in, f16 out) and TO_F32 (f16 in, f32 out).
#include "elementwise.h"

layout(constant_id = 0) const uint WG = 256;
layout(local_size_x_id = 0) in;

#if defined(TO_F16)
layout(std430, binding = 0) readonly buffer In { float src[]; };
layout(std430, binding = 1) writeonly buffer Out { uint dst[]; };
#else
layout(std430, binding = 0) readonly buffer In { uint src[]; };
layout(std430, binding = 1) writeonly buffer Out { float dst[]; };
#endif

void main() {
  const uint stride = gl_NumWorkGroups.x * WG;
#if defined(TO_F16)
  const uint words = (pc.n + 1) / 2;
  for (uint w = gl_GlobalInvocationID.x; w < words; w += stride) {
    const float lo = src[2 * w];
    const float hi = 2 * w + 1 < pc.n ? src[2 * w + 1] : 0.0;
    dst[w] = packHalf2x16(vec2(lo, hi));
  }
#else
  for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += stride) {
    dst[i] = unpackHalf2x16(src[i >> 1])[i & 1];
  }
#endif
}
