// Push constants of element-wise kernels (convert).
#include "push_common.h"

KVS_PUSH_BEGIN(ElementwisePush)
  KVS_UINT n;  // number of elements
KVS_PUSH_END(ElementwisePush)
