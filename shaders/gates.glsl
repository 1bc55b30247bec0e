// The gated activations of the forward pass, act(g) * u with the float
// operations of backend/cpu_ops.cpp: the weight kernels' epilogues
// (weight_types.glsl) and the gated product of activations (activation.comp).
#ifndef KVSCOPE_GATES_GLSL
#define KVSCOPE_GATES_GLSL

#include "gates.h"

// SwiGLU: silu(g) * u.
float siluGate(float g, float u) { return g / (1.0 + exp(-g)) * u; }

// GeGLU: gelu(g) * u, GELU's tanh form. tanh's argument is clamped where
// tanh is +-1 in float, so no implementation's exp overflows into inf / inf.
float geluGate(float g, float u) {
  const float t = clamp(0.7978845608 * g * (1.0 + 0.044715 * g * g), -10.0, 10.0);
  return 0.5 * g * (1.0 + tanh(t)) * u;
}

// gpt-oss's clamped SwiGLU: g sigmoid(1.702 g) (u + 1), g = min(g, 7),
// u = clamp(u, -7, 7).
float swigluOaiGate(float g, float u) {
  g = min(g, KVS_SWIGLU_OAI_LIMIT);
  u = clamp(u, -KVS_SWIGLU_OAI_LIMIT, KVS_SWIGLU_OAI_LIMIT);
  return g / (1.0 + exp(-KVS_SWIGLU_OAI_ALPHA * g)) * (u + 1.0);
}

#endif
