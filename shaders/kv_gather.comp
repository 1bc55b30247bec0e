#version 450
// Copies the K and V codes of the rows the indexer selected (index_select.comp's
// lists) into one gathered page, laid out as a one-layer KV page of
// gatherRows rows per KV head (engine/gpu/attention_kernels.h):
//   [K: nHeadKv][gatherRows][keyRowWords] [V: nHeadKv][gatherRows][valueRowWords]
//   [nHeadKv] row counts
// so that the attention kernels read them as a short cache, decoding the
// codes where they read a row, with pc.rowCounts pointing at the counts.
// A workgroup copies one row at a time (its source page index is uniform),
// looping over (KV head, list slot) items.
#define KVS_INDEXER
#include "attention.h"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer Lists { uint lists[]; };
layout(std430, binding = 1) writeonly buffer Gathered { uint gathered[]; };
layout(std430, binding = 2) readonly buffer Page { uint words[]; } pages[KVS_ATTENTION_MAX_PAGES];

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint valueBlock = pc.nHeadKv * pc.gatherRows * pc.keyRowWords;
  const uint countsWord = valueBlock + pc.nHeadKv * pc.gatherRows * pc.valueRowWords;
  for (uint item = gl_WorkGroupID.x; item < pc.nHeadKv * pc.gatherRows;
       item += gl_NumWorkGroups.x) {
    const uint head = item / pc.gatherRows, slot = item % pc.gatherRows;
    const uint list = pc.listBase + head * pc.listStride;
    const uint count = lists[list];
    if (slot == 0u && lid == 0u) gathered[countsWord + head] = count;
    if (slot >= count) continue;
    const uint row = lists[list + 1u + slot];
    const uint page = row / pc.rowsPerPage;
    const uint at = head * pc.rowsPerPage + row % pc.rowsPerPage;
    const uint dst = head * pc.gatherRows + slot;
    for (uint w = lid; w < pc.keyRowWords; w += WG)
      gathered[dst * pc.keyRowWords + w] = pages[page].words[pc.keyOffset + at * pc.keyRowWords + w];
    for (uint w = lid; w < pc.valueRowWords; w += WG) {
      gathered[valueBlock + dst * pc.valueRowWords + w] =
          pages[page].words[pc.valueOffset + at * pc.valueRowWords + w];
    }
  }
}
