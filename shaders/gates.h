// Constants of the gated activations (gates.glsl), shared with C++.
#ifndef KVSCOPE_GATES_H
#define KVSCOPE_GATES_H

// model::kSwigluOaiAlpha and kSwigluOaiLimit (gpt-oss's clamped SwiGLU).
#define KVS_SWIGLU_OAI_ALPHA 1.702
#define KVS_SWIGLU_OAI_LIMIT 7.0

#endif
