// Push constants of row-wise kernels (rmsnorm, softmax): `rows` rows of `n` values.
#include "push_common.h"

KVS_PUSH_BEGIN(RowsPush)
  KVS_UINT n;
  KVS_UINT rows;
  KVS_FLOAT param;  // rmsnorm: epsilon; softmax: scale applied before exp
  KVS_UINT accumulate;  // rmsnorm: 1 adds the normed row to y (a residual)
  KVS_UINT unweighted;  // rmsnorm: 1 leaves out the weight (reads none)
KVS_PUSH_END(RowsPush)
