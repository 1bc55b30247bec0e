#version 450
// The routed pairs grouped by expert, for the grouped expert products
// (weight_matmul.comp with EXPERTS): counts[e] pairs chose expert e, and
// lists[e * n .. + counts[e]) are those pairs in increasing order (a token
// picks an expert at most once, so an expert has at most n pairs). One
// invocation per expert scanning every pair: deterministic, no atomics, and
// short (pairs = n * used).
#include "moe.h"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Ids { uint ids[]; };  // [n * used]
// [experts] counts, then [experts][n] lists
layout(std430, binding = 1) writeonly buffer Groups { uint groups[]; };

void main() {
  const uint e = gl_GlobalInvocationID.x;
  if (e >= pc.experts) return;
  const uint pairs = pc.n * pc.used;
  uint count = 0;
  for (uint p = 0; p < pairs; ++p) {
    if (ids[p] == e) {
      groups[pc.experts + e * pc.n + count] = p;
      ++count;
    }
  }
  groups[e] = count;
}
