#version 450
// The element-wise ops of the forward pass (activation.h), with the float
// operations of the CPU backend's (backend/cpu_step.cpp). Binding 0 is x,
// binding 1 the other operand (add: out, gates: up; unread otherwise).
#include "activation.h"
#include "gates.glsl"

layout(constant_id = 0) const uint WG = 256;
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) buffer Other { float other[]; };

void main() {
  const uint stride = gl_NumWorkGroups.x * WG;
  for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += stride) {
    if (pc.op == KVS_ACT_SCALE) {
      x[i] = x[i] * pc.param;
    } else if (pc.op == KVS_ACT_ADD) {
      other[i] = other[i] + x[i];
    } else if (pc.op == KVS_ACT_SOFTCAP) {
      // Clamped where tanh is +-1 in float (as geluGate's argument); a NaN
      // stays NaN, as on the CPU (clamp's result for NaN is undefined).
      const float t = x[i] / pc.param;
      x[i] = isnan(t) ? t : pc.param * tanh(clamp(t, -10.0, 10.0));
    } else {
      const float u = other[(i / pc.width) * pc.upWidth + pc.upFirst + i % pc.width];
      if (pc.op == KVS_ACT_SILU_GATE) x[i] = siluGate(x[i], u);
      else if (pc.op == KVS_ACT_GELU_GATE) x[i] = geluGate(x[i], u);
      else x[i] = swigluOaiGate(x[i], u);
    }
  }
}
