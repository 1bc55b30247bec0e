// Declarations shared by the two launch shapes of the attention kernels
// (attention.comp for GPUs, attention_cpu.comp for CPU devices): the
// specialization constants, the bindings, and how a workgroup's task index
// maps to (KV head, tile of query tokens, split of the cached rows). With
// pc.rowCounts a KV head reads fewer rows than the causal mask allows: the
// indexer's gathered rows (engine/gpu/attention_indexer.cpp). With
// pc.tailSide a dispatch sees one side of each query's precision tail: the
// codes older than it, or the tail's f16 rows (bound as a ring page); the
// two dispatches' splits share the stats, as splits of one dispatch do.
//
// Variants with CODEC defined read rows of any codec (kv_codec.glsl, picked
// per K and V by specialization constants) in groups of 8 values, and keep
// queries and weights in float32 like CpuBackend::attention does for a
// cache that is not f16 on both sides. Rotated codecs need no change here:
// the host binds the rotated queries (q' = R_k q) as `q` and rotates the
// output back (R_v^T), see engine/gpu/attention_kernels.cpp.
#ifndef KVSCOPE_ATTENTION_COMMON_GLSL
#define KVSCOPE_ATTENTION_COMMON_GLSL

#define KVS_ATTENTION
#include "attention.h"
#include "attention_f16.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const uint GQA = 1;     // query heads per KV head
layout(constant_id = 3) const uint TOKENS = 1;  // query tokens per task
layout(local_size_x_id = 0) in;

const uint PAIRS = TOKENS * GQA;          // (token, query head) pairs of a task
const uint WORDS = (HEAD_DIM + 1u) / 2u;  // words of a row that hold values
const float kNoScore = -3.0e38;           // below any score; running max of no row

layout(std430, binding = 0) readonly buffer Q { float q[]; };  // [n][nHead][HEAD_DIM]
layout(std430, binding = 1) buffer Stats { vec2 stats[]; };    // [splits][n][nHead] (max, sum)
layout(std430, binding = 2) buffer Scores { float scores[]; };  // [n][nHead][scoreStride]
#ifdef PASS_OUT
// One split: [n][nHead][HEAD_DIM]; several: [splits][n][nHead][HEAD_DIM].
layout(std430, binding = 3) writeonly buffer Out { float outv[]; };
layout(std430, binding = 4) readonly buffer Sinks { float sinks[]; };  // [nHead] when pc.sinks
#define PAGE_BINDING 5
#else
#define PAGE_BINDING 3
#endif
layout(std430, binding = PAGE_BINDING) readonly buffer Page {
  uint words[];
} pages[KVS_ATTENTION_MAX_PAGES];

#ifdef CODEC
#include "kv_codec.glsl"
#endif

struct Task {
  uint kvHead, token0, tokens, split, rowBegin, rowEnd;
};

// The first row the query at `pos` reads from the precision tail.
uint tailStart(uint pos) { return max(pos + 1u - min(pos + 1u, pc.tailRows), pc.tailFloor); }

// t.split counts this dispatch's splits; its stats and partial output go to
// split pc.splitBase + t.split of the arrays.
Task task(uint index) {
  Task t;
  t.split = index % pc.splits;
  const uint tile = (index / pc.splits) % pc.tokenTiles;
  t.kvHead = pc.kvHeadBase + index / (pc.splits * pc.tokenTiles);
  t.token0 = tile * TOKENS;
  t.tokens = min(TOKENS, pc.n - t.token0);
  t.rowBegin = pc.rowStart + t.split * pc.splitRows;
  // Rows past the last token's position are visible to none of the tile;
  // nor, codes side, rows from its last token's tail on (every token's
  // tail), nor, tail side, rows before its first token's tail (no token's).
  const uint last = pc.pos0 + t.token0 + t.tokens - 1u;
  t.rowEnd = min(t.rowBegin + pc.splitRows, last + 1u);
  if (pc.tailSide == 1u) t.rowEnd = min(t.rowEnd, tailStart(last));
  if (pc.tailSide == 2u) t.rowBegin = max(t.rowBegin, tailStart(pc.pos0 + t.token0));
  if (pc.rowCounts != 0u) {
    const uint count = pages[0].words[pc.rowCounts + t.kvHead];
    t.rowEnd = min(t.rowEnd, count - min(count, pc.countTrim));
  }
  return t;
}

uint taskCount() {
  return (pc.kvHeads != 0u ? pc.kvHeads : pc.nHead / GQA) * pc.tokenTiles * pc.splits;
}
uint head(Task t, uint pair) { return t.kvHead * GQA + pair % GQA; }
uint token(Task t, uint pair) { return t.token0 + pair / GQA; }
bool visible(Task t, uint pair, uint row) {
  const uint pos = pc.pos0 + token(t, pair);
  bool seen = pair / GQA < t.tokens && row <= pos && (pc.window == 0u || row + pc.window > pos);
  if (pc.tailSide == 1u) seen = seen && row < tailStart(pos);
  if (pc.tailSide == 2u) seen = seen && row >= tailStart(pos);
  return seen;
}
uint scoreIndex(Task t, uint pair, uint row) {
  return (token(t, pair) * pc.nHead + head(t, pair)) * pc.scoreStride + row;
}
// Word offset of cache row `row` of the task's KV head, in the K or V block.
uint keyWord(Task t, uint row) {
  return pc.keyOffset + (t.kvHead * pc.rowsPerPage + row % pc.rowsPerPage) * pc.keyRowWords;
}
uint valueWord(Task t, uint row) {
  return pc.valueOffset + (t.kvHead * pc.rowsPerPage + row % pc.rowsPerPage) * pc.valueRowWords;
}
// The end of the tile that starts at row r0: at most WG rows, within one page,
// so the page index is uniform across the workgroup.
uint tileEnd(Task t, uint r0) {
  return min(min(r0 + WG, t.rowEnd), (r0 / pc.rowsPerPage + 1u) * pc.rowsPerPage);
}
// The split of the arrays a task's stats and partial output go to.
uint arraySplit(Task t) { return pc.splitBase + t.split; }
// Where the partial output of (split, token, head) starts.
uint outIndex(Task t, uint pair) {
  const uint splitBase = pc.allSplits > 1u ? arraySplit(t) * pc.n * pc.nHead : 0u;
  return (splitBase + token(t, pair) * pc.nHead + head(t, pair)) * HEAD_DIM;
}
// (max, sum of exp(score - max)) of pair `pair` over all splits.
vec2 combinedStats(Task t, uint pair) {
  const uint at = token(t, pair) * pc.nHead + head(t, pair), stride = pc.n * pc.nHead;
  float mx = kNoScore, sum = 0.0;
  for (uint s = 0u; s < pc.allSplits; ++s) {
    if (stats[s * stride + at].y > 0.0) mx = max(mx, stats[s * stride + at].x);
  }
  for (uint s = 0u; s < pc.allSplits; ++s) {
    const vec2 st = stats[s * stride + at];
    if (st.y > 0.0) sum += st.y * exp(st.x - mx);
  }
  return vec2(mx, sum);
}

#ifdef PASS_OUT
// (max, sum) of a pair's scores with its head's attention sink joined, when
// the step has sinks: one more score, unscaled, that weighs no row.
vec2 withSink(Task t, uint pair, float mx, float sum) {
  if (pc.sinks == 0u) return vec2(mx, sum);
  const float s = sinks[head(t, pair)];
  if (s > mx) return vec2(s, sum * exp(mx - s) + 1.0);
  return vec2(mx, sum + exp(s - mx));
}
#endif

#endif
