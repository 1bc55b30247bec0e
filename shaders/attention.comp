#version 450
// Causal GQA attention of n query tokens over an f16 paged KV cache, with the
// numerics of CpuBackend::attention: queries rounded to f16, scores scaled by
// 1/sqrt(head_dim), softmax max-subtracted, the NORMALIZED weights rounded to
// f16 before they multiply the f16 values, float32 accumulation.
//
// Because a weight is rounded after normalization, every (token, head) needs
// the final max and sum before any value is weighted: two passes over the keys.
// A task is (KV head, tile of TOKENS query tokens, split of the cached rows);
// its PAIRS = TOKENS * GQA (token, query head) pairs share every K and V row
// load. Rows go in tiles of WG that never cross a page, so the page index is
// uniform across the workgroup (no non-uniform descriptor indexing needed).
//   pass 1 (stats): invocation i scores row tile + i for every pair, keeping a
//     running max and sum of exp; a workgroup reduction gives (max, sum) per pair.
//   pass 2 (out): scores again (or reads them back from the score buffer),
//     weight = f16(exp(score - max) / sum) into shared memory; then each
//     invocation accumulates weight * V for its own (pair, value word) items.
// Variants: PASS_STATS writes (max, sum) per (split, token, head); PASS_OUT
// with one split runs both passes in one workgroup and writes the output, with
// several splits it combines the stats of all splits and writes a partial
// output per split (attention_reduce.comp sums them).
//
// This file is the GPU launch shape (64 invocations, shared memory);
// attention_cpu.comp is the one for CPU devices, with the same bindings.
// CODEC variants decode rows in groups of 8 values (kv_codec.glsl): the
// weighted sum's items are then (pair, group) instead of (pair, word).
#include "attention_common.glsl"

#ifdef CODEC
const uint QWORDS = KV_GROUPS * 4u;  // query words per pair, zero past HEAD_DIM
const uint ITEM_WORDS = 4u;          // words of a weighted-sum item: one group
#else
const uint QWORDS = WORDS;
const uint ITEM_WORDS = 1u;
#endif
const uint ROW_ITEMS = QWORDS / ITEM_WORDS;
const uint ITEMS = (PAIRS * ROW_ITEMS + WG - 1u) / WG;  // (pair, item) per invocation

shared vec2 queries[PAIRS * QWORDS];  // [pair][word] (f16 variants: rounded to f16)
shared float weights[WG * PAIRS];    // [tile row][pair]
shared float partMax[PAIRS * WG], partSum[PAIRS * WG];
shared float pairMax[PAIRS], pairSum[PAIRS];

float score[PAIRS];

void loadQueries(Task t) {
  barrier();  // the previous task may still read `queries`
  for (uint i = gl_LocalInvocationID.x; i < PAIRS * QWORDS; i += WG) {
    const uint pair = i / QWORDS, word = i % QWORDS;
    vec2 value = vec2(0.0);
    if (pair / GQA < t.tokens && 2u * word < HEAD_DIM) {
      const uint base = (token(t, pair) * pc.nHead + head(t, pair)) * HEAD_DIM + 2u * word;
      value.x = q[base];
      if (2u * word + 1u < HEAD_DIM) value.y = q[base + 1u];
#ifndef CODEC
      value = vec2(roundToHalf(value.x), roundToHalf(value.y));
#endif
    }
    queries[i] = value;
  }
  barrier();
}

// score[] of cache row `row` (in `page`) for every pair.
void computeScores(Task t, uint page, uint row) {
  const uint base = keyWord(t, row);
  for (uint p = 0u; p < PAIRS; ++p) score[p] = 0.0;
#ifdef CODEC
  for (uint g = 0u; g < KV_GROUPS; ++g) {
    vec2 k[4];
    decodeKey(page, base, pc.keyRowWords, g, k);
    for (uint p = 0u; p < PAIRS; ++p) {
      for (uint j = 0u; j < 4u; ++j) score[p] += dot(queries[p * QWORDS + 4u * g + j], k[j]);
    }
  }
#else
  for (uint w = 0u; w < WORDS; ++w) {
    const vec2 k = unpackHalf2x16(pages[page].words[base + w]);
    for (uint p = 0u; p < PAIRS; ++p) score[p] += dot(queries[p * WORDS + w], k);
  }
#endif
  for (uint p = 0u; p < PAIRS; ++p) score[p] *= pc.scale;
}

// Item `item` (a word, or for CODEC a group of 8 values) of the V row at word `base`.
void loadValue(uint page, uint base, uint item, out vec2 v[ITEM_WORDS]) {
#ifdef CODEC
  decodeValue(page, base, pc.valueRowWords, item, v);
#else
  v[0] = unpackHalf2x16(pages[page].words[base + item]);
#endif
}

// pairMax / pairSum from the invocations' (max, sum of exp(score - max)) in
// partMax / partSum.
void reducePartials() {
  const uint lid = gl_LocalInvocationID.x;
  barrier();
  if (lid < PAIRS) {
    float mx = kNoScore, sum = 0.0;
    for (uint i = 0u; i < WG; ++i) mx = max(mx, partMax[lid * WG + i]);
    for (uint i = lid * WG; i < (lid + 1u) * WG; ++i) {
      if (partSum[i] > 0.0) sum += partSum[i] * exp(partMax[i] - mx);
    }
    pairMax[lid] = mx;
    pairSum[lid] = sum;
  }
  barrier();
}

// Pass 1: pairMax / pairSum over the task's rows.
void statsPass(Task t) {
  const uint lid = gl_LocalInvocationID.x;
  float m[PAIRS], l[PAIRS];
  for (uint p = 0u; p < PAIRS; ++p) {
    m[p] = kNoScore;
    l[p] = 0.0;
  }
  for (uint r0 = t.rowBegin; r0 < t.rowEnd; r0 = tileEnd(t, r0)) {
    const uint end = tileEnd(t, r0), row = min(r0 + lid, end - 1u);
    computeScores(t, KVS_PAGE_OF(r0, pc.rowsPerPage), row);
    for (uint p = 0u; p < PAIRS; ++p) {
      if (r0 + lid >= end || !visible(t, p, row)) continue;
      const float s = score[p];
      if (pc.scoreStride != 0u) scores[scoreIndex(t, p, row)] = s;
      if (s > m[p]) {
        l[p] *= exp(m[p] - s);
        m[p] = s;
      }
      l[p] += exp(s - m[p]);
    }
  }
  for (uint p = 0u; p < PAIRS; ++p) {
    partMax[p * WG + lid] = m[p];
    partSum[p * WG + lid] = l[p];
  }
  reducePartials();
}

#ifdef PASS_OUT
// pairMax / pairSum of the whole context from the per-split stats, which the
// invocations read a share each (hundreds of splits at long contexts: one
// invocation reading them all would wait on every load in turn).
const uint STATS_BATCH = 4u;  // splits whose stats an invocation loads together

void combineStats(Task t) {
  const uint lid = gl_LocalInvocationID.x, stride = pc.n * pc.nHead;
  for (uint p = 0u; p < PAIRS; ++p) {
    float m = kNoScore, l = 0.0;
    if (p / GQA < t.tokens) {
      const uint at = token(t, p) * pc.nHead + head(t, p);
      for (uint s0 = lid; s0 < pc.allSplits; s0 += STATS_BATCH * WG) {
        vec2 st[STATS_BATCH];
        for (uint b = 0u; b < STATS_BATCH; ++b) {
          const uint s = s0 + b * WG;
          st[b] = s < pc.allSplits ? stats[s * stride + at] : vec2(kNoScore, 0.0);
        }
        for (uint b = 0u; b < STATS_BATCH; ++b) {
          if (st[b].y <= 0.0) continue;
          if (st[b].x > m) {
            l *= exp(m - st[b].x);
            m = st[b].x;
          }
          l += st[b].y * exp(st[b].x - m);
        }
      }
    }
    partMax[p * WG + lid] = m;
    partSum[p * WG + lid] = l;
  }
  reducePartials();
}

// V rows whose loads an invocation issues together: one row at a time, each
// load waited for in turn, left a GPU idle (64 rows of a tile took ~30 us on
// an H200, 4 at a time ~15 us). VALUE_WORDS words of values in flight per
// item (>= 4; the host picks it per device, see attention_kernels.cpp).
layout(constant_id = 4) const uint VALUE_WORDS = 16;
const uint ROW_BATCH = VALUE_WORDS / ITEM_WORDS;

// Whether some pair weights a row of the tile's rows [r, end) (sparse V skips
// the batches no pair keeps).
bool rowsKept(uint r, uint end) {
  for (uint i = r * PAIRS; i < end * PAIRS; ++i) {
    if (weights[i] != 0.0) return true;
  }
  return false;
}

// Pass 2: the weighted sum of V rows for every pair, into `outv`; with sparse
// V, weights below pc.sparseV count as 0 and a batch of ROW_BATCH V rows no
// pair keeps is not read.
void outputPass(Task t) {
  const uint lid = gl_LocalInvocationID.x;
  vec2 acc[ITEMS * ITEM_WORDS];
  for (uint k = 0u; k < ITEMS * ITEM_WORDS; ++k) acc[k] = vec2(0.0);
  for (uint r0 = t.rowBegin; r0 < t.rowEnd; r0 = tileEnd(t, r0)) {
    const uint page = KVS_PAGE_OF(r0, pc.rowsPerPage), rows = tileEnd(t, r0) - r0;
    const uint row = r0 + min(lid, rows - 1u);
    if (pc.scoreStride == 0u) computeScores(t, page, row);
    if (lid < rows) {
      for (uint p = 0u; p < PAIRS; ++p) {
        float w = 0.0;
        if (visible(t, p, row)) {
          const float s = pc.scoreStride != 0u ? scores[scoreIndex(t, p, row)] : score[p];
          w = exp(s - pairMax[p]) / pairSum[p];
#ifndef CODEC
          w = roundToHalf(w);
#endif
          if (w < pc.sparseV) w = 0.0;
        }
        weights[lid * PAIRS + p] = w;
      }
    }
    barrier();
    const uint base = valueWord(t, r0);
    for (uint r = 0u; r < rows; r += ROW_BATCH) {
      const uint end = min(r + ROW_BATCH, rows);
      if (pc.sparseV > 0.0 && !rowsKept(r, end)) continue;  // uniform: `weights` is shared
      for (uint k = 0u; k < ITEMS; ++k) {
        const uint item = min(lid + k * WG, PAIRS * ROW_ITEMS - 1u);
        vec2 v[ROW_BATCH * ITEM_WORDS];
        for (uint b = 0u; b < ROW_BATCH; ++b) {
          vec2 rowItem[ITEM_WORDS];
          loadValue(page, base + min(r + b, rows - 1u) * pc.valueRowWords, item % ROW_ITEMS,
                    rowItem);
          for (uint j = 0u; j < ITEM_WORDS; ++j) v[b * ITEM_WORDS + j] = rowItem[j];
        }
        // Rows in order, as one at a time; a row of weight 0 (past the
        // tile, or dropped by sparse V) adds nothing, not even 0 * inf.
        for (uint b = 0u; b < ROW_BATCH; ++b) {
          const float w = r + b < end ? weights[(r + b) * PAIRS + item / ROW_ITEMS] : 0.0;
          if (w == 0.0) continue;
          for (uint j = 0u; j < ITEM_WORDS; ++j) acc[k * ITEM_WORDS + j] += w * v[b * ITEM_WORDS + j];
        }
      }
    }
    barrier();  // `weights` is rewritten by the next tile
  }
  for (uint k = 0u; k < ITEMS; ++k) {
    const uint item = lid + k * WG, pair = item / ROW_ITEMS;
    if (item >= PAIRS * ROW_ITEMS || pair / GQA >= t.tokens) continue;
    for (uint j = 0u; j < ITEM_WORDS; ++j) {
      const uint word = (item % ROW_ITEMS) * ITEM_WORDS + j;
      if (2u * word >= HEAD_DIM) continue;
      const uint base = outIndex(t, pair) + 2u * word;
      outv[base] = acc[k * ITEM_WORDS + j].x;
      if (2u * word + 1u < HEAD_DIM) outv[base + 1u] = acc[k * ITEM_WORDS + j].y;
    }
  }
}
#endif

void main() {
#ifdef CODEC
  initCodebooks();
#endif
  for (uint index = gl_WorkGroupID.x; index < taskCount(); index += gl_NumWorkGroups.x) {
    const Task t = task(index);
    loadQueries(t);
#ifdef PASS_OUT
    if (pc.allSplits == 1u) {
      statsPass(t);
    } else {
      combineStats(t);
    }
    if (pc.sinks != 0u) {
      const uint lid = gl_LocalInvocationID.x;
      if (lid < PAIRS && lid / GQA < t.tokens) {
        const vec2 st = withSink(t, lid, pairMax[lid], pairSum[lid]);
        pairMax[lid] = st.x;
        pairSum[lid] = st.y;
      }
      barrier();
    }
    outputPass(t);
#else
    statsPass(t);
    const uint lid = gl_LocalInvocationID.x;
    if (lid < PAIRS && lid / GQA < t.tokens) {
      stats[(arraySplit(t) * pc.n + token(t, lid)) * pc.nHead + head(t, lid)] =
          vec2(pairMax[lid], pairSum[lid]);
    }
#endif
  }
}
