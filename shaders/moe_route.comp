#version 450
// The router's picks: for each token, its `used` highest-scoring experts
// (ties to the lower index, NaN scores last) in pick order, and their
// weights, with the CPU backend's arithmetic (backend/cpu_step.cpp moe()):
//   softmaxFirst: p = softmax(scores); weights = p[picks] / max(sum, 2^-14)
//   otherwise:    weights = softmax(scores[picks])
// then times `scale`. One invocation per token: a router has at most a few
// hundred experts, so the per-token scan is short.
#include "moe.h"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Scores { float scores[]; };  // [n, experts]
layout(std430, binding = 1) writeonly buffer Ids { uint ids[]; };        // [n, used]
layout(std430, binding = 2) writeonly buffer Weights { float weights[]; };  // [n, used]

const uint kMaxUsed = 64;  // gpu::Kernels::moeRoute's bound on experts per token

float key(float s) { return isnan(s) ? -1.0 / 0.0 : s; }

void main() {
  const uint t = gl_GlobalInvocationID.x;
  if (t >= pc.n) return;
  const uint base = t * pc.experts;
  // The softmax's max and denominator (softmaxFirst), as cpu::softmax.
  float m = -1.0 / 0.0, sum = 0.0;
  if (pc.softmaxFirst != 0u) {
    for (uint e = 0; e < pc.experts; ++e) m = max(m, scores[base + e]);
    for (uint e = 0; e < pc.experts; ++e) sum += exp(scores[base + e] - m);
  }
  const float inv = 1.0 / sum;
  uint picked[kMaxUsed];
  float w[kMaxUsed];
  for (uint k = 0; k < pc.used; ++k) {
    // The best expert not yet picked: scanning upwards with a strict > keeps
    // the lower index among equal keys. Selecting on the probabilities, as the
    // CPU does, keeps ties that rounding made.
    uint best = 0xffffffffu;
    float bestKey = 0.0;
    for (uint e = 0; e < pc.experts; ++e) {
      bool taken = false;
      for (uint j = 0; j < k; ++j) taken = taken || picked[j] == e;
      if (taken) continue;
      const float s = scores[base + e];
      const float v = key(pc.softmaxFirst != 0u ? exp(s - m) * inv : s);
      if (best == 0xffffffffu || v > bestKey) {
        best = e;
        bestKey = v;
      }
    }
    picked[k] = best;
    const float s = scores[base + best];
    w[k] = pc.softmaxFirst != 0u ? exp(s - m) * inv : s;
  }
  if (pc.softmaxFirst != 0u) {
    float total = 0.0;
    for (uint k = 0; k < pc.used; ++k) total += w[k];
    for (uint k = 0; k < pc.used; ++k) w[k] /= max(total, 6.103515625e-5);
  } else {
    float top = -1.0 / 0.0, total = 0.0;
    for (uint k = 0; k < pc.used; ++k) top = max(top, w[k]);
    for (uint k = 0; k < pc.used; ++k) {
      w[k] = exp(w[k] - top);
      total += w[k];
    }
    const float invTotal = 1.0 / total;
    for (uint k = 0; k < pc.used; ++k) w[k] *= invTotal;
  }
  for (uint k = 0; k < pc.used; ++k) {
    ids[t * pc.used + k] = picked[k];
    weights[t * pc.used + k] = w[k] * pc.scale;
  }
}
