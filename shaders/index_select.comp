#version 450
// The indexer's selection on the device, kv::selectRows's rule
// (engine/kv/indexer.h) for one layer: workgroup h writes KV head h's list
//   lists[listBase + h * listStride] = count, then `count` cached rows
// in ascending order: the first `sinks` rows, the `wanted` best pages among
// the pages not wholly inside sinks or window (highest score first, ties to
// the lower page, NaN lowest), and the last `window` rows. The host runs it
// only when those do not cover every row (kv::selectsAll), so `wanted` is
// below the number of candidate pages.
//
// The wanted-th best score is found a byte at a time on order-preserving
// integer keys (4 histogram passes over the pages, no sort), then one
// invocation walks the pages in order, taking those above it and as many tied
// with it, lowest first, as the budget leaves.
#define KVS_INDEXER
#include "attention.h"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer Scores { float scores[]; };  // [nHeadKv][pages]
layout(std430, binding = 1) buffer Lists { uint lists[]; };

shared uint histogram[256];
shared uint digit, needed;

uint sinkEnd() { return min(pc.sinks, pc.rows); }
uint windowBegin() { return pc.rows - min(pc.window, pc.rows); }
uint pageBegin(uint p) { return p * pc.pageRows; }
uint pageEnd(uint p) { return min(pc.rows, (p + 1u) * pc.pageRows); }
bool candidate(uint p) { return pageEnd(p) > sinkEnd() && pageBegin(p) < windowBegin(); }

// An unsigned key in the order of the scores: NaN as -inf, -0 as +0. Tested
// on the bits: a driver need not preserve NaN or signed zero in float math.
uint keyOf(float s) {
  uint b = floatBitsToUint(s);
  if ((b & 0x7fffffffu) > 0x7f800000u) b = 0xff800000u;  // NaN
  if ((b & 0x7fffffffu) == 0u) b = 0u;                   // -0
  return (b & 0x80000000u) != 0u ? ~b : b | 0x80000000u;
}

uint listBase, listCount, listNext;

// Appends rows [begin, end) not already listed (runs come in ascending order).
void emit(uint begin, uint end) {
  for (uint r = max(begin, listNext); r < end; ++r) lists[listBase + 1u + listCount++] = r;
  listNext = max(listNext, end);
}

void main() {
  const uint head = gl_WorkGroupID.x, lid = gl_LocalInvocationID.x;
  // The wanted-th largest key t, a byte at a time from the top (radix
  // select): per pass, a histogram of the next byte of the keys that share
  // t's bytes so far; the byte where the count from the top reaches what is
  // still needed is t's. `needed` ends as the number of keys equal to t to
  // take (those above t are all taken).
  if (lid == 0u) needed = pc.wanted;
  uint t = 0u;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (uint b = lid; b < 256u; b += WG) histogram[b] = 0u;
    barrier();
    for (uint p = lid; p < pc.pages; p += WG) {
      if (!candidate(p)) continue;
      const uint key = keyOf(scores[head * pc.pages + p]);
      if (shift == 24 || (key >> uint(shift + 8)) == (t >> uint(shift + 8)))
        atomicAdd(histogram[(key >> uint(shift)) & 255u], 1u);
    }
    barrier();
    if (lid == 0u) {
      uint b = 255u;
      while (b > 0u && histogram[b] < needed) needed -= histogram[b--];
      digit = b;
    }
    barrier();
    t |= digit << uint(shift);
  }
  if (lid != 0u) return;
  uint ties = needed;  // candidates keyed t to take, lowest pages first
  listBase = pc.listBase + head * pc.listStride;
  listCount = 0u;
  listNext = 0u;
  emit(0u, sinkEnd());
  for (uint p = 0u; p < pc.pages; ++p) {
    if (!candidate(p)) continue;
    const uint key = keyOf(scores[head * pc.pages + p]);
    bool take = key > t;
    if (key == t && ties > 0u) {
      take = true;
      --ties;
    }
    if (take) emit(pageBegin(p), pageEnd(p));
  }
  emit(windowBegin(), pc.rows);
  lists[listBase] = listCount;
}
