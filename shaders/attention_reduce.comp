#version 450
// Sums the per-split partial outputs of attention.comp (PASS_OUT, several
// splits): out[i] = sum over s of partial[s * count + i].
//  - CPU devices: an invocation per output, summing the splits in order.
//  - GPUs (SPLIT_LANES): a workgroup per OUTPUTS consecutive outputs, its
//    LANES lanes each summing every LANES-th split with loads issued
//    BATCH at a time, then the lanes' sums in lane order. At 16K rows a
//    decode step has ~256 splits, and one invocation reading them in turn
//    waited on each load.
#define KVS_ATTENTION_REDUCE
#include "attention.h"

layout(constant_id = 0) const uint WG = 256;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer Partial { float partial[]; };
layout(std430, binding = 1) writeonly buffer Out { float outv[]; };

#if defined(SPLIT_LANES)
const uint OUTPUTS = 32u;  // consecutive outputs of a workgroup: coalesced loads
const uint LANES = WG / OUTPUTS;
const uint BATCH = 8u;
shared float laneSums[WG];

void main() {
  const uint lid = gl_LocalInvocationID.x, lane = lid / OUTPUTS;
  for (uint first = gl_WorkGroupID.x * OUTPUTS; first < pc.count;
       first += gl_NumWorkGroups.x * OUTPUTS) {
    const uint i = first + lid % OUTPUTS;
    float sum = 0.0;
    if (i < pc.count) {
      for (uint s0 = lane; s0 < pc.splits; s0 += BATCH * LANES) {
        float v[BATCH];
        for (uint b = 0u; b < BATCH; ++b) {
          const uint s = s0 + b * LANES;
          v[b] = s < pc.splits ? partial[s * pc.count + i] : 0.0;
        }
        for (uint b = 0u; b < BATCH; ++b) sum += v[b];
      }
    }
    laneSums[lid] = sum;
    barrier();
    if (lane == 0u && i < pc.count) {
      float total = 0.0;
      for (uint l = 0u; l < LANES; ++l) total += laneSums[l * OUTPUTS + lid];
      outv[i] = total;
    }
    barrier();  // laneSums is rewritten by the next outputs
  }
}
#else
void main() {
  for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += gl_NumWorkGroups.x * WG) {
    float sum = 0.0;
    for (uint s = 0u; s < pc.splits; ++s) sum += partial[s * pc.count + i];
    outv[i] = sum;
  }
}
#endif
