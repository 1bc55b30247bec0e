// Workgroup-wide sum and max through shared memory. WG (specialization
// constant 0, the workgroup size) must be a power of two. Every invocation of
// the workgroup must call these in uniform control flow.
#ifndef KVSCOPE_REDUCE_GLSL
#define KVSCOPE_REDUCE_GLSL

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

shared float reduceScratch[WG];

float workgroupSum(float v) {
  const uint lid = gl_LocalInvocationID.x;
  reduceScratch[lid] = v;
  barrier();
  for (uint offset = WG / 2; offset > 0; offset >>= 1) {
    if (lid < offset) reduceScratch[lid] += reduceScratch[lid + offset];
    barrier();
  }
  const float total = reduceScratch[0];
  barrier();  // scratch is reused by the next call
  return total;
}

float workgroupMax(float v) {
  const uint lid = gl_LocalInvocationID.x;
  reduceScratch[lid] = v;
  barrier();
  for (uint offset = WG / 2; offset > 0; offset >>= 1) {
    if (lid < offset) reduceScratch[lid] = max(reduceScratch[lid], reduceScratch[lid + offset]);
    barrier();
  }
  const float result = reduceScratch[0];
  barrier();
  return result;
}

#endif
