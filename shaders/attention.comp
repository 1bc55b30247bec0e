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
#include "attention_common.glsl"

const uint ITEMS = (PAIRS * WORDS + WG - 1u) / WG;  // (pair, word) items per invocation

shared vec2 queries[PAIRS * WORDS];  // [pair][word], rounded to f16
shared float weights[WG * PAIRS];    // [tile row][pair]
shared float partMax[PAIRS * WG], partSum[PAIRS * WG];
shared float pairMax[PAIRS], pairSum[PAIRS];

float score[PAIRS];

void loadQueries(Task t) {
  barrier();  // the previous task may still read `queries`
  for (uint i = gl_LocalInvocationID.x; i < PAIRS * WORDS; i += WG) {
    const uint pair = i / WORDS, word = i % WORDS;
    vec2 value = vec2(0.0);
    if (pair / GQA < t.tokens) {
      const uint base = (token(t, pair) * pc.nHead + head(t, pair)) * HEAD_DIM + 2u * word;
      value.x = roundToHalf(q[base]);
      if (2u * word + 1u < HEAD_DIM) value.y = roundToHalf(q[base + 1u]);
    }
    queries[i] = value;
  }
  barrier();
}

// score[] of cache row `row` (in `page`) for every pair.
void computeScores(Task t, uint page, uint row) {
  const uint base = rowWord(t, pc.keyOffset, row);
  for (uint p = 0u; p < PAIRS; ++p) score[p] = 0.0;
  for (uint w = 0u; w < WORDS; ++w) {
    const vec2 k = unpackHalf2x16(pages[page].words[base + w]);
    for (uint p = 0u; p < PAIRS; ++p) score[p] += dot(queries[p * WORDS + w], k);
  }
  for (uint p = 0u; p < PAIRS; ++p) score[p] *= pc.scale;
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
    computeScores(t, r0 / pc.rowsPerPage, row);
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

#ifdef PASS_OUT
// pairMax / pairSum of the whole context from the per-split stats.
void combineStats(Task t) {
  const uint lid = gl_LocalInvocationID.x;
  if (lid < PAIRS && lid / GQA < t.tokens) {
    const vec2 st = combinedStats(t, lid);
    pairMax[lid] = st.x;
    pairSum[lid] = st.y;
  }
  barrier();
}

// Pass 2: the weighted sum of V rows for every pair, into `outv`.
void outputPass(Task t) {
  const uint lid = gl_LocalInvocationID.x;
  vec2 acc[ITEMS];
  for (uint k = 0u; k < ITEMS; ++k) acc[k] = vec2(0.0);
  for (uint r0 = t.rowBegin; r0 < t.rowEnd; r0 = tileEnd(t, r0)) {
    const uint page = r0 / pc.rowsPerPage, rows = tileEnd(t, r0) - r0;
    const uint row = r0 + min(lid, rows - 1u);
    if (pc.scoreStride == 0u) computeScores(t, page, row);
    if (lid < rows) {
      for (uint p = 0u; p < PAIRS; ++p) {
        float w = 0.0;
        if (visible(t, p, row)) {
          const float s = pc.scoreStride != 0u ? scores[scoreIndex(t, p, row)] : score[p];
          w = roundToHalf(exp(s - pairMax[p]) / pairSum[p]);
        }
        weights[lid * PAIRS + p] = w;
      }
    }
    barrier();
    const uint base = rowWord(t, pc.valueOffset, r0);
    for (uint r = 0u; r < rows; ++r) {
      for (uint k = 0u; k < ITEMS; ++k) {
        const uint item = min(lid + k * WG, PAIRS * WORDS - 1u);
        const vec2 v = unpackHalf2x16(pages[page].words[base + r * pc.rowWords + item % WORDS]);
        acc[k] += weights[r * PAIRS + item / WORDS] * v;
      }
    }
    barrier();  // `weights` is rewritten by the next tile
  }
  for (uint k = 0u; k < ITEMS; ++k) {
    const uint item = lid + k * WG, pair = item / WORDS, word = item % WORDS;
    if (item >= PAIRS * WORDS || pair / GQA >= t.tokens) continue;
    const uint base = outIndex(t, pair) + 2u * word;
    outv[base] = acc[k].x;
    if (2u * word + 1u < HEAD_DIM) outv[base + 1u] = acc[k].y;
  }
}
#endif

void main() {
  for (uint index = gl_WorkGroupID.x; index < taskCount(); index += gl_NumWorkGroups.x) {
    const Task t = task(index);
    loadQueries(t);
#ifdef PASS_OUT
    if (pc.splits == 1u) {
      statsPass(t);
    } else {
      combineStats(t);
    }
    outputPass(t);
#else
    statsPass(t);
    const uint lid = gl_LocalInvocationID.x;
    if (lid < PAIRS && lid / GQA < t.tokens) {
      stats[(t.split * pc.n + token(t, lid)) * pc.nHead + head(t, lid)] =
          vec2(pairMax[lid], pairSum[lid]);
    }
#endif
  }
}
