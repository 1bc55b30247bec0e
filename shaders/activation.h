// Push constants of activation.comp: one element-wise op over n values of
// an activation, selected by `op`.
#include "push_common.h"

// x = param * x
#define KVS_ACT_SCALE 0u
// out = out + x
#define KVS_ACT_ADD 1u
// x = param * tanh(x / param) (a logit soft-cap)
#define KVS_ACT_SOFTCAP 2u
// x[t, i] = gate(x[t, i], up[t, upFirst + i]) over rows of `width` values
// (gates.glsl: SwiGLU, GeGLU, gpt-oss's clamped SwiGLU)
#define KVS_ACT_SILU_GATE 3u
#define KVS_ACT_GELU_GATE 4u
#define KVS_ACT_SWIGLU_OAI_GATE 5u

KVS_PUSH_BEGIN(ActivationPush)
  KVS_UINT n;         // values of x
  KVS_UINT op;        // KVS_ACT_*
  KVS_FLOAT param;    // scale: the factor; softcap: the cap
  KVS_UINT width;     // gates: values per row of x
  KVS_UINT upWidth;   // gates: values per row of up
  KVS_UINT upFirst;   // gates: up's first column read
KVS_PUSH_END(ActivationPush)
