#version 450
// Y[n, rows] = X[n, cols] W[rows, cols]^T with W in a GGUF type
// (weight_types.glsl): the prefill form of weight_matvec.comp. Each unit of
// weights is dequantized once per tile of tokens, then reused for all of them.
//  - WIDE_LOADS (CPU devices): each invocation owns a tile of R rows x T
//    tokens held in registers; no shared memory, no barriers.
//  - otherwise (GPUs): a workgroup owns a tile of rows x tokens (weights.h);
//    it dequantizes one unit per row into shared memory, stages the matching
//    X values beside it, and each invocation accumulates 2 rows x 4 tokens.
// Float weights whose rows are not whole units (cols % UNIT != 0) take an
// element-wise path.
// EXPERTS: the grouped expert products of weights.h, one expert per
// workgroup row z: its tokens are the pairs moe_group.comp listed for it,
// read from and written to the pairs' rows.
#if defined(WIDE_LOADS)
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#endif
#include "weights.h"

layout(constant_id = 0) const uint WG = 64;  // GPU shape: KVS_WEIGHT_TILE_WG
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint R = 1;  // CPU shape: rows per invocation
layout(constant_id = 2) const uint T = 1;  // CPU shape: tokens per invocation

#include "weight_types.glsl"

#if defined(EXPERTS)
// [experts] pair counts, then [experts][n] pair lists (moe_group.comp)
layout(std430, binding = 4) readonly buffer Groups { uint groups[]; };
#endif

// This workgroup's product: its first weight row, its token count and where
// its pair list starts (expert products; otherwise 0, n and unused).
uint wRow0 = 0u, tokenCount = 0u, list0 = 0u;

// The output row of token t of the product, and its input row.
uint outRow(uint t) {
#if defined(EXPERTS)
  return groups[list0 + t];
#else
  return t;
#endif
}
uint inRow(uint t) {
#if defined(EXPERTS)
  return outRow(t) / pc.share;
#else
  return t;
#endif
}

// Sets the globals above; false when the workgroup has nothing to compute.
bool beginProduct() {
#if defined(EXPERTS)
  const uint expert = gl_WorkGroupID.z;
  wRow0 = expert * pc.rows;
  tokenCount = groups[expert];
  list0 = pc.experts + expert * pc.n;
#else
  tokenCount = pc.n;
#endif
  return tokenCount > 0u;
}

float dotUnit(const vec4 w[UNIT4], const vec4 xv[UNIT4]) {
  float s = 0.0;
  for (uint i = 0; i < UNIT4; ++i) s += dot(w[i], xv[i]);
  return s;
}

#if defined(WIDE_LOADS)

// The X values of `token` that unit u multiplies (rows of X whole units).
void loadXUnit(uint token, uint u, out vec4 xv[UNIT4]) {
  const uint base = token * pc.cols;
  for (uint c = 0; c < CHUNKS; ++c) {
    const uint first = (base + chunkColumn(u, c)) / 8;
    for (uint i = 0; i < CHUNK8; ++i) {
      loadX8(first + i, xv[c * CHUNK / 4 + 2 * i], xv[c * CHUNK / 4 + 2 * i + 1]);
    }
  }
}

void main() {
  if (!beginProduct()) return;
  const uint rowTasks = (pc.rows + R - 1) / R;
  const uint tasks = rowTasks * ((tokenCount + T - 1) / T);
  const uint units = pc.cols / UNIT;
  for (uint task = gl_GlobalInvocationID.x; task < tasks; task += gl_NumWorkGroups.x * WG) {
    const uint row0 = (task % rowTasks) * R, token0 = (task / rowTasks) * T;
    uint rows[R], tokens[T];
    float acc[R][T];
    for (uint r = 0; r < R; ++r) {
      rows[r] = min(row0 + r, pc.rows - 1);
      for (uint t = 0; t < T; ++t) acc[r][t] = 0.0;
    }
    for (uint t = 0; t < T; ++t) tokens[t] = inRow(min(token0 + t, tokenCount - 1));
#if defined(FLOAT_WEIGHTS)
    if (pc.cols % UNIT != 0) {
      for (uint k = 0; k < pc.cols; ++k) {
        float wk[R];
        for (uint r = 0; r < R; ++r) wk[r] = weightAt((wRow0 + rows[r]) * pc.cols + k);
        for (uint t = 0; t < T; ++t) {
          const float xk = x4[tokens[t] * pc.cols + k];
          for (uint r = 0; r < R; ++r) acc[r][t] += wk[r] * xk;
        }
      }
    } else
#endif
    for (uint u = 0; u < units; ++u) {
      vec4 wv[R][UNIT4];
      for (uint r = 0; r < R; ++r) decodeUnit(wRow0 + rows[r], u, wv[r]);
      for (uint t = 0; t < T; ++t) {
        vec4 xv[UNIT4];
        loadXUnit(tokens[t], u, xv);
        for (uint r = 0; r < R; ++r) acc[r][t] += dotUnit(wv[r], xv);
      }
    }
    for (uint t = 0; t < T; ++t) {
      if (token0 + t >= tokenCount) break;
      const uint out0 = outRow(token0 + t) * pc.rows;
      for (uint r = 0; r < R; ++r) {
        if (row0 + r < pc.rows)
          y[out0 + row0 + r] = epilogue(acc[r][t], wRow0 + row0 + r, out0 + row0 + r);
      }
    }
  }
}

#else

const uint BM = KVS_WEIGHT_TILE_ROWS;
const uint BN = KVS_WEIGHT_TILE_TOKENS;
#if defined(FLOAT_WEIGHTS)
const uint KSTEP = 32;  // columns staged per step (any cols: the tail is zero-filled)
#else
const uint KSTEP = UNIT;  // one unit per row per step
#endif
shared float ws[BM][KSTEP];
shared float xs[BN][KSTEP];

// Column of X matching position k of a staged step `s` (unit order).
uint stepColumn(uint s, uint k) {
#if defined(FLOAT_WEIGHTS)
  return s * KSTEP + k;
#else
  return chunkColumn(s, k / CHUNK) + k % CHUNK;
#endif
}

void stageWeights(uint row0, uint s, uint lid) {
#if defined(FLOAT_WEIGHTS)
  for (uint i = lid; i < BM * KSTEP; i += WG) {
    const uint r = i / KSTEP, col = stepColumn(s, i % KSTEP);
    const uint row = wRow0 + min(row0 + r, pc.rows - 1);
    ws[r][i % KSTEP] = col < pc.cols ? weightAt(row * pc.cols + col) : 0.0;
  }
#else
  if (lid < BM) {
    vec4 wv[UNIT4];
    decodeUnit(wRow0 + min(row0 + lid, pc.rows - 1), s, wv);
    for (uint i = 0; i < UNIT4; ++i) {
      for (uint j = 0; j < 4; ++j) ws[lid][4 * i + j] = wv[i][j];
    }
  }
#endif
}

void main() {
  if (!beginProduct()) return;  // uniform: the whole workgroup
  const uint lid = gl_LocalInvocationID.x;
  loadCodebook(lid, WG);
  const uint ty = lid / 4, tx = lid % 4;  // rows 2ty, 2ty + 1; tokens 4tx .. 4tx + 3
  const uint rowTiles = (pc.rows + BM - 1) / BM;
  const uint tiles = rowTiles * ((tokenCount + BN - 1) / BN);
  const uint steps = (pc.cols + KSTEP - 1) / KSTEP;
  for (uint tile = gl_WorkGroupID.x; tile < tiles; tile += gl_NumWorkGroups.x) {
    const uint row0 = (tile % rowTiles) * BM, token0 = (tile / rowTiles) * BN;
    float acc[2][4] = float[2][4](float[4](0.0, 0.0, 0.0, 0.0), float[4](0.0, 0.0, 0.0, 0.0));
    for (uint s = 0; s < steps; ++s) {
      stageWeights(row0, s, lid);
      for (uint i = lid; i < BN * KSTEP; i += WG) {
        const uint t = i / KSTEP, col = stepColumn(s, i % KSTEP);
        const uint token = inRow(min(token0 + t, tokenCount - 1));
        xs[t][i % KSTEP] = col < pc.cols ? x4[token * pc.cols + col] : 0.0;
      }
      barrier();
      for (uint k = 0; k < KSTEP; ++k) {
        const float a0 = ws[2 * ty][k], a1 = ws[2 * ty + 1][k];
        for (uint j = 0; j < 4; ++j) {
          const float b = xs[4 * tx + j][k];
          acc[0][j] += a0 * b;
          acc[1][j] += a1 * b;
        }
      }
      barrier();  // the next step overwrites the tiles
    }
    for (uint i = 0; i < 2; ++i) {
      for (uint j = 0; j < 4; ++j) {
        const uint row = row0 + 2 * ty + i, token = token0 + 4 * tx + j;
        if (row < pc.rows && token < tokenCount) {
          const uint at = outRow(token) * pc.rows + row;
          y[at] = epilogue(acc[i][j], wRow0 + row, at);
        }
      }
    }
  }
}

#endif
