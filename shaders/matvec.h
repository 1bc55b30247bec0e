// Push constants of the matrix-vector kernels: y[rows] = W[rows, cols] * x[cols].
#include "push_common.h"

KVS_PUSH_BEGIN(MatvecPush)
  KVS_UINT rows;
  KVS_UINT cols;
KVS_PUSH_END(MatvecPush)
