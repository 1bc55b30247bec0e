// Push constants of the weight kernels (weight_matvec.comp, weight_matmul.comp):
// Y[n, rows] = X[n, cols] * W[rows, cols]^T, with W in a GGUF type (see
// engine/gpu/weight_kernels.h for the repacked layout the planes describe).
#include "push_common.h"

KVS_PUSH_BEGIN(WeightPush)
  KVS_UINT rows;      // weight rows = outputs per token
  KVS_UINT cols;      // weight columns = inputs per token
  KVS_UINT n;         // tokens (expert products: of the batch)
  KVS_UINT rowWords;  // quantized types: 32-bit words per repacked row
  KVS_UINT plane1;    // quantized types: word offsets of planes 1..3 in a row
  KVS_UINT plane2;    //   (plane 0 starts the row; unused planes are 0)
  KVS_UINT plane3;
  KVS_UINT share;     // expert products: pairs per input row (below)
  KVS_UINT experts;   // expert products: experts in the stack
KVS_PUSH_END(WeightPush)

// Epilogues (specialization constant 3 of both kernels, so a product without
// one compiles without its code): the small op that follows a product in the
// forward pass, folded into the store of output (token t, row r) with the
// float operations of the CPU backend's op:
//   BIAS:       y = Wx + bias[r]            (the q/k/v bias)
//   ACCUMULATE: y = y + Wx                  (a residual add)
//   SILU_GATE:  y = silu(y) * Wx            (SwiGLU: y holds the gate)
//   GELU_GATE:  y = gelu(y) * Wx            (GeGLU, GELU's tanh form)
//   SWIGLU_OAI_GATE: y = g sigmoid(1.702 g) (u + 1), g = min(y, 7),
//               u = clamp(Wx, -7, 7)        (gpt-oss's clamped SwiGLU)
#define KVS_WEIGHT_BIAS 1u
#define KVS_WEIGHT_ACCUMULATE 2u
#define KVS_WEIGHT_SILU_GATE 4u
#define KVS_WEIGHT_GELU_GATE 8u
#define KVS_WEIGHT_SWIGLU_OAI_GATE 16u
// (The gates' arithmetic: gates.glsl.)

// Expert products (EXPERTS): pair p = token * slots + slot multiplies expert
// ids[p] of a stack of experts, each `rows` rows, by input row p / share
// (share = slots: the token's row, shared by its slots; 1: the pair's own
// row) into output row p. weight_matvec.comp takes one pair per workgroup
// row (z); weight_matmul.comp one expert per workgroup row, over the pairs
// moe_group.comp listed for it, so a prefill reads each expert's weights once
// per tile of its tokens.

// GPU shape of weight_matmul.comp: a workgroup of 64 invocations computes a
// tile of 32 rows x 16 tokens (2 rows x 4 tokens each).
#define KVS_WEIGHT_TILE_WG 64
#define KVS_WEIGHT_TILE_ROWS 32
#define KVS_WEIGHT_TILE_TOKENS 16
