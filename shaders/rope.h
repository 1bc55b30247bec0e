// Push constants of rope.comp: rotate the first `dims` values of every head
// of n tokens x heads rows of headDim floats, with angles from a table.
#include "push_common.h"

KVS_PUSH_BEGIN(RopePush)
  KVS_UINT n;        // tokens
  KVS_UINT heads;    // heads per token
  KVS_UINT headDim;  // floats per head
  KVS_UINT dims;     // rotated values per head (even, <= headDim)
  KVS_UINT neox;     // 1: pairs (i, i + dims/2); 0: pairs (2i, 2i+1)
  KVS_FLOAT tailScale;  // multiplies the values past `dims` (the table scales the rotated ones)
KVS_PUSH_END(RopePush)
