#version 450
// The indexer's page scores for one decode query (kv/kv_index.h): page p of
// KV head h scores, over the GQA query heads q of h, the highest of
//   2^e * sum_i max(q_i lo_i, q_i hi_i)                (Quest's upper bound of
//                                                      q . k over the page's keys)
//   2^e * (q . mean + 2 sqrt(sum_i (q_i std_i)^2))     (MEAN_STD)
// as kv::KvIndex::scorePages does; the sums' order, and so their rounding, is
// this shader's own. q is in the K codec's space (rotated for rotated codecs).
// One invocation per (KV head, page).
#define KVS_INDEXER
#include "attention.h"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const uint GQA = 1;
layout(constant_id = 3) const bool MEAN_STD = false;
const float kStdWeight = 2.0;  // kv::KvIndex::kStdWeight
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer Sidecar { uint sidecar[]; };
layout(std430, binding = 1) readonly buffer Q { float q[]; };          // [nHead][HEAD_DIM]
layout(std430, binding = 2) writeonly buffer Scores { float scores[]; };  // [nHeadKv][pages]

// Byte b of an entry, sign-extended.
int entryByte(uint entry, uint b) {
  return bitfieldExtract(int(sidecar[entry + b / 4u]), int(8u * (b % 4u)), 8);
}

void main() {
  const uint item = gl_GlobalInvocationID.x;
  if (item >= pc.nHeadKv * pc.pages) return;
  const uint head = item / pc.pages, page = item % pc.pages;
  const uint entry = pc.sidecarBase + (page * pc.nHeadKv + head) * pc.entryWords;
  const int e = entryByte(entry, 2u * HEAD_DIM);
  float best = 0.0;
  for (uint g = 0u; g < GQA; ++g) {
    const uint qBase = (head * GQA + g) * HEAD_DIM;
    float s = 0.0, spread = 0.0;
    for (uint w = 0u; w < HEAD_DIM / 4u; ++w) {
      // lo and hi, or mean and std
      const uint aWord = sidecar[entry + w], bWord = sidecar[entry + HEAD_DIM / 4u + w];
      for (uint k = 0u; k < 4u; ++k) {
        const float x = q[qBase + 4u * w + k];
        const float a = float(bitfieldExtract(int(aWord), int(8u * k), 8));
        const float b = float(bitfieldExtract(int(bWord), int(8u * k), 8));
        if (MEAN_STD) {
          s += x * a;
          spread += (x * b) * (x * b);
        } else {
          s += max(x * a, x * b);
        }
      }
    }
    if (MEAN_STD) s += kStdWeight * sqrt(spread);
    s = ldexp(s, e);
    best = g == 0u ? s : max(best, s);
  }
  scores[head * pc.pages + page] = best;
}
