// Push constants of add.comp: dst[i] += src[i % period] for i < n.
#include "push_common.h"

KVS_PUSH_BEGIN(AddPush)
  KVS_UINT n;       // elements of dst
  KVS_UINT period;  // n for a residual add; the row width for a broadcast bias
KVS_PUSH_END(AddPush)
