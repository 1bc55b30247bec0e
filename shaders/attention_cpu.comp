#version 450
// The attention kernels' launch shape for CPU devices (lavapipe); the numerics,
// passes, tasks and variants are attention.comp's.
//
// lavapipe runs a buffer or shared-memory load whose address is not built from
// constants and push constants lane by lane, each lane with a descriptor
// lookup and a bounds check, so the cost of a kernel is its count of such
// loads (of a vector: one per lane and 64-bit component). Here the workgroup is
// one subgroup (WG is the subgroup size) and walks the task's rows one at a
// time; each invocation owns LANE_WORDS consecutive words of every row, read in
// CHUNK_WORDS-word loads (32 bytes, one u64vec4, when the row allows), and
// keeps its words of the queries and of the weighted V sums in registers. A
// score is the subgroup sum of the invocations' partial dot products, so
// every invocation holds it and computes the same softmax statistics; no
// shared memory, no barrier. Pass 2 recomputes the scores: storing them from
// one invocation and reading them back in all costs more lane-by-lane
// accesses than the recomputation (the host passes scoreStride 0).
// Registers per invocation grow with PAIRS * head_dim / WG only, which keeps
// lavapipe's compile time near a second (an invocation per row, with whole
// rows of queries and sums in registers, ran ~25% faster but took 15-90 s to
// compile per variant).
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "attention_common.glsl"

// CODEC variants: each invocation owns LANE_GROUPS consecutive groups of 8
// values (kv_codec.glsl decodes them from 32-bit loads) instead of words.
//
// Words per load: 8, 4, 2 or 1, dividing LANE_WORDS and the row stride.
layout(constant_id = 4) const uint CHUNK_WORDS = 8;
#ifdef CODEC
const uint LANE_GROUPS = (KV_GROUPS + WG - 1u) / WG;
const uint LANE_WORDS = LANE_GROUPS * 4u;
#else
const uint LANE_WORDS = (WORDS + WG - 1u) / WG;
#endif
const uint LANE_CHUNKS = LANE_WORDS / CHUNK_WORDS;

layout(std430, binding = 0) readonly buffer Q2 { vec2 q2[]; };  // q as word pairs (HEAD_DIM even)
#ifdef PASS_OUT
layout(std430, binding = 3) writeonly buffer Out2 { vec2 outv2[]; };
#endif
layout(std430, binding = PAGE_BINDING) readonly buffer Page8 {
  u64vec4 v[];
} pages8[KVS_ATTENTION_MAX_PAGES];
layout(std430, binding = PAGE_BINDING) readonly buffer Page4 {
  u64vec2 v[];
} pages4[KVS_ATTENTION_MAX_PAGES];
layout(std430, binding = PAGE_BINDING) readonly buffer Page2 {
  uint64_t v[];
} pages2[KVS_ATTENTION_MAX_PAGES];

vec2 queries[PAIRS * LANE_WORDS];  // [pair][word]: this invocation's words (f16: rounded)
vec2 acc[PAIRS * LANE_WORDS];      // [pair][word]: its words of the weighted V sums
vec2 words[LANE_WORDS];            // its words of the row last read
float score[PAIRS];
float pairMax[PAIRS], pairSum[PAIRS];

uint firstWord() { return gl_SubgroupInvocationID * LANE_WORDS; }

#ifndef CODEC
void unpackWords(uint at, uint64_t bits) {
  const uvec2 w = unpack32(bits);
  words[at] = unpackHalf2x16(w.x);
  words[at + 1u] = unpackHalf2x16(w.y);
}

// words[] = this invocation's words of the row starting at word `base` of
// `page`. A chunk past the row's end is read from its last chunk instead: its
// words lie past WORDS, where the queries are zero and nothing is stored.
void loadRow(uint page, uint base) {
  [[unroll]] for (uint c = 0u; c < LANE_CHUNKS; ++c) {
    const uint word = base + min(firstWord() + c * CHUNK_WORDS, pc.keyRowWords - CHUNK_WORDS);
    const uint at = c * CHUNK_WORDS;
    if (CHUNK_WORDS == 8u) {
      const u64vec4 v = pages8[page].v[word / 8u];
      [[unroll]] for (uint i = 0u; i < 4u; ++i) unpackWords(at + 2u * i, v[i]);
    } else if (CHUNK_WORDS == 4u) {
      const u64vec2 v = pages4[page].v[word / 4u];
      [[unroll]] for (uint i = 0u; i < 2u; ++i) unpackWords(at + 2u * i, v[i]);
    } else if (CHUNK_WORDS == 2u) {
      unpackWords(at, pages2[page].v[word / 2u]);
    } else {
      words[at] = unpackHalf2x16(pages[page].words[word]);
    }
  }
}
// f16 variants: K and V rows have the same stride (pc.keyRowWords).
void loadKeyRow(uint page, uint base) { loadRow(page, base); }
void loadValueRow(uint page, uint base) { loadRow(page, base); }
#else
// words[] = this invocation's groups of the K (or V) row at word `base`;
// groups past the row are zero.
void loadKeyRow(uint page, uint base) {
  [[unroll]] for (uint c = 0u; c < LANE_GROUPS; ++c) {
    const uint g = gl_SubgroupInvocationID * LANE_GROUPS + c;
    vec2 v[4];
    decodeKey(page, base, pc.keyRowWords, min(g, KV_GROUPS - 1u), v);
    [[unroll]] for (uint j = 0u; j < 4u; ++j) words[4u * c + j] = g < KV_GROUPS ? v[j] : vec2(0.0);
  }
}
void loadValueRow(uint page, uint base) {
  [[unroll]] for (uint c = 0u; c < LANE_GROUPS; ++c) {
    const uint g = gl_SubgroupInvocationID * LANE_GROUPS + c;
    vec2 v[4];
    decodeValue(page, base, pc.valueRowWords, min(g, KV_GROUPS - 1u), v);
    [[unroll]] for (uint j = 0u; j < 4u; ++j) words[4u * c + j] = g < KV_GROUPS ? v[j] : vec2(0.0);
  }
}
#endif

void loadQueries(Task t) {
  [[unroll]] for (uint p = 0u; p < PAIRS; ++p) {
    const uint base = (token(t, p) * pc.nHead + head(t, p)) * HEAD_DIM;
    [[unroll]] for (uint w = 0u; w < LANE_WORDS; ++w) {
      const uint word = firstWord() + w;
      vec2 value = vec2(0.0);
      if (p / GQA < t.tokens && word < WORDS) {
        if (HEAD_DIM % 2u == 0u) {
          value = q2[base / 2u + word];
        } else {
          value.x = q[base + 2u * word];
          if (2u * word + 1u < HEAD_DIM) value.y = q[base + 2u * word + 1u];
        }
#ifndef CODEC
        value = vec2(roundToHalf(value.x), roundToHalf(value.y));
#endif
      }
      queries[p * LANE_WORDS + w] = value;
    }
  }
}

// score[] of the row starting at word `base` of `page`, for every pair.
void computeScores(uint page, uint base) {
  loadKeyRow(page, base);
  [[unroll]] for (uint p = 0u; p < PAIRS; ++p) {
    float part = 0.0;
    [[unroll]] for (uint w = 0u; w < LANE_WORDS; ++w) {
      part += dot(queries[p * LANE_WORDS + w], words[w]);
    }
    score[p] = subgroupAdd(part) * pc.scale;
  }
}

// Pass 1: pairMax / pairSum over the task's rows.
void statsPass(Task t) {
  [[unroll]] for (uint p = 0u; p < PAIRS; ++p) {
    pairMax[p] = kNoScore;
    pairSum[p] = 0.0;
  }
  for (uint row = t.rowBegin; row < t.rowEnd; ++row) {
    computeScores(KVS_PAGE_OF(row, pc.rowsPerPage), keyWord(t, row));
    [[unroll]] for (uint p = 0u; p < PAIRS; ++p) {
      if (!visible(t, p, row)) continue;
      const float s = score[p];
      if (s > pairMax[p]) {
        pairSum[p] *= exp(pairMax[p] - s);
        pairMax[p] = s;
      }
      pairSum[p] += exp(s - pairMax[p]);
    }
  }
}

#ifdef PASS_OUT
// Pass 2: the weighted sum of V rows for every pair, into `outv` (sparse V
// as in attention.comp).
void outputPass(Task t) {
  [[unroll]] for (uint i = 0u; i < PAIRS * LANE_WORDS; ++i) acc[i] = vec2(0.0);
  for (uint row = t.rowBegin; row < t.rowEnd; ++row) {
    const uint page = KVS_PAGE_OF(row, pc.rowsPerPage);
    computeScores(page, keyWord(t, row));
    float weight[PAIRS];
    [[unroll]] for (uint p = 0u; p < PAIRS; ++p) {
      weight[p] = 0.0;
      if (visible(t, p, row)) weight[p] = exp(score[p] - pairMax[p]) / pairSum[p];
#ifndef CODEC
      weight[p] = roundToHalf(weight[p]);
#endif
      if (weight[p] < pc.sparseV) weight[p] = 0.0;
    }
    if (pc.sparseV > 0.0) {
      // Sparse V: a row no pair keeps is not read (the branch is uniform).
      bool kept = false;
      [[unroll]] for (uint p = 0u; p < PAIRS; ++p) kept = kept || weight[p] != 0.0;
      if (!kept) continue;
    }
    loadValueRow(page, valueWord(t, row));
    [[unroll]] for (uint p = 0u; p < PAIRS; ++p) {
      [[unroll]] for (uint w = 0u; w < LANE_WORDS; ++w) {
        acc[p * LANE_WORDS + w] += weight[p] * words[w];
      }
    }
  }
  [[unroll]] for (uint p = 0u; p < PAIRS; ++p) {
    if (p / GQA >= t.tokens) continue;
    const uint base = outIndex(t, p);
    [[unroll]] for (uint w = 0u; w < LANE_WORDS; ++w) {
      const uint word = firstWord() + w;
      if (word >= WORDS) continue;
      const vec2 value = acc[p * LANE_WORDS + w];
      if (HEAD_DIM % 2u == 0u) {
        outv2[base / 2u + word] = value;
      } else {
        outv[base + 2u * word] = value.x;
        if (2u * word + 1u < HEAD_DIM) outv[base + 2u * word + 1u] = value.y;
      }
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
      [[unroll]] for (uint p = 0u; p < PAIRS; ++p) {
        const vec2 st = p / GQA < t.tokens ? combinedStats(t, p) : vec2(kNoScore, 0.0);
        pairMax[p] = st.x;
        pairSum[p] = st.y;
      }
    }
    [[unroll]] for (uint p = 0u; p < PAIRS; ++p) {
      if (p / GQA >= t.tokens) continue;
      const vec2 st = withSink(t, p, pairMax[p], pairSum[p]);
      pairMax[p] = st.x;
      pairSum[p] = st.y;
    }
    outputPass(t);
#else
    statsPass(t);
    [[unroll]] for (uint p = 0u; p < PAIRS; ++p) {
      if (gl_SubgroupInvocationID == 0u && p / GQA < t.tokens) {
        stats[(arraySplit(t) * pc.n + token(t, p)) * pc.nHead + head(t, p)] =
            vec2(pairMax[p], pairSum[p]);
      }
    }
#endif
  }
}
