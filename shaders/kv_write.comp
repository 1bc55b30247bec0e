#version 450
// Writes the K and V rows of n new tokens of one layer into the paged KV cache
// as f16 (round to nearest even, bit-exact with kv::F16Scheme). Token t goes to
// row pos0 + t of page (pos0 + t) / rowsPerPage; each workgroup loops over
// tokens so the page index stays uniform across it, and its invocations
// stride over the words of all of the token's K and V rows. An odd head_dim
// leaves a zero half in the last word of a row (the row padding).
#define KVS_KV_WRITE
#include "attention.h"
#include "attention_f16.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

// Bits of the float32 inputs, so that no device flushes a subnormal on load.
layout(std430, binding = 0) readonly buffer K { uint k[]; };  // [n][nHeadKv][headDim]
layout(std430, binding = 1) readonly buffer V { uint v[]; };  // [n][nHeadKv][headDim]
layout(std430, binding = 2) writeonly buffer Page { uint words[]; } pages[KVS_ATTENTION_MAX_PAGES];

uint packed(uint src, uint first, uint count, uint part) {
  const uint lo = part == 0u ? k[src + first] : v[src + first];
  if (first + 1u >= count) return halfBits(lo);
  const uint hi = part == 0u ? k[src + first + 1u] : v[src + first + 1u];
  return halfBits(lo) | (halfBits(hi) << 16);
}

void main() {
  const uint rowWords = pc.keyRowWords;  // f16 K and V rows have the same stride
  const uint wordsPerPart = pc.nHeadKv * rowWords;
  for (uint t = gl_WorkGroupID.x; t < pc.n; t += gl_NumWorkGroups.x) {
    const uint row = pc.pos0 + t;
    const uint page = KVS_PAGE_OF(row, pc.rowsPerPage), slot = row % pc.rowsPerPage;
    for (uint i = gl_LocalInvocationID.x; i < 2u * wordsPerPart; i += WG) {
      const uint part = i / wordsPerPart, head = (i % wordsPerPart) / rowWords;
      const uint word = i % rowWords;
      const uint src = (t * pc.nHeadKv + head) * pc.headDim;
      const uint value = 2u * word < pc.headDim ? packed(src, 2u * word, pc.headDim, part) : 0u;
      const uint dst = (part == 0u ? pc.keyOffset : pc.valueOffset) +
                       (head * pc.rowsPerPage + slot) * rowWords + word;
      pages[page].words[dst] = value;
    }
  }
}
