// Push-constant blocks are declared once, in a header per kernel family that
// both GLSL and C++ include. In C++ each block becomes a plain struct in
// kvscope::push, checked to be a whole number of 32-bit words within the
// 128 bytes every Vulkan device guarantees. Fields are 32-bit scalars only,
// so std430 and C++ agree on the layout without padding rules.
#ifndef KVSCOPE_PUSH_COMMON_H
#define KVSCOPE_PUSH_COMMON_H

#ifdef __cplusplus
#include <cstdint>
#define KVS_UINT uint32_t
#define KVS_FLOAT float
#define KVS_PUSH_BEGIN(Name) namespace kvscope::push { struct Name {
#define KVS_PUSH_END(Name)                                                        \
  };                                                                              \
  static_assert(sizeof(Name) % 4 == 0 && sizeof(Name) <= 128, #Name " layout"); \
  }
#else
#define KVS_UINT uint
#define KVS_FLOAT float
#define KVS_PUSH_BEGIN(Name) layout(push_constant) uniform Name {
#define KVS_PUSH_END(Name) } pc;
#endif

#endif
