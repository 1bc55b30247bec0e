#version 450
// Copies the K and V codes of the rows the indexer selected (index_select.comp's
// lists) into one gathered page, laid out as a one-layer KV page of
// gatherRows rows per KV head (engine/gpu/attention_kernels.h):
//   [K: nHeadKv][gatherRows][keyRowWords] [V: nHeadKv][gatherRows][valueRowWords]
//   [nHeadKv] row counts
// so that the attention kernels read them as a short cache, decoding the
// codes where they read a row, with pc.rowCounts pointing at the counts.
// A task is WG list slots of one KV head, an invocation copying a whole row.
// The page array is indexed only by the uniform loop variable: each
// invocation copies its row in the pass over the KV page that holds it.
#define KVS_INDEXER
#include "attention.h"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer Lists { uint lists[]; };
layout(std430, binding = 1) writeonly buffer Gathered { uint gathered[]; };
layout(std430, binding = 2) readonly buffer Page { uint words[]; } pages[KVS_ATTENTION_MAX_PAGES];

void main() {
  const uint valueBlock = pc.nHeadKv * pc.gatherRows * pc.keyRowWords;
  const uint countsWord = valueBlock + pc.nHeadKv * pc.gatherRows * pc.valueRowWords;
  const uint chunks = (pc.gatherRows + WG - 1u) / WG;
  const uint kvPages = (pc.rows + pc.rowsPerPage - 1u) / pc.rowsPerPage;
  for (uint task = gl_WorkGroupID.x; task < pc.nHeadKv * chunks; task += gl_NumWorkGroups.x) {
    const uint head = task / chunks, slot = task % chunks * WG + gl_LocalInvocationID.x;
    const uint list = pc.listBase + head * pc.listStride;
    const uint count = lists[list];
    if (slot == 0u) gathered[countsWord + head] = count;
    const uint row = slot < count ? lists[list + 1u + slot] : 0xffffffffu;
    const uint at = head * pc.rowsPerPage + row % pc.rowsPerPage;
    const uint dst = head * pc.gatherRows + slot;
    for (uint page = 0u; page < kvPages; ++page) {
      if (row / pc.rowsPerPage != page) continue;
      for (uint w = 0u; w < pc.keyRowWords; ++w)
        gathered[dst * pc.keyRowWords + w] = pages[page].words[pc.keyOffset + at * pc.keyRowWords + w];
      for (uint w = 0u; w < pc.valueRowWords; ++w) {
        gathered[valueBlock + dst * pc.valueRowWords + w] =
            pages[page].words[pc.valueOffset + at * pc.valueRowWords + w];
      }
    }
  }
}
