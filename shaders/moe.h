// Push constants of the mixture-of-experts kernels (moe_route.comp,
// moe_sum.comp): n tokens, each routed to `used` of `experts` experts.
#include "push_common.h"

KVS_PUSH_BEGIN(MoePush)
  KVS_UINT n;          // tokens
  KVS_UINT experts;    // route: router scores per token
  KVS_UINT used;       // experts per token (slots)
  KVS_UINT width;      // sum: values per output row
  KVS_UINT softmaxFirst;  // route: 1 softmax over all experts, then top-k
                          // (renormalised); 0 top-k, then softmax over them
  KVS_FLOAT scale;     // route: the weights' multiplier (1: none)
  KVS_UINT residual;      // sum: 1 adds the sum to the residual too
  KVS_UINT expertScale;   // sum: 1 scales each product by its expert's scale
KVS_PUSH_END(MoePush)
