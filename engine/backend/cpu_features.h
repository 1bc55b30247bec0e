#pragma once
// KVSCOPE_CPU_AVX2: the compiler targets AVX2, FMA and F16C (KVSCOPE_NATIVE
// on such a machine), so the SIMD kernels are built; without it every CPU
// kernel has a portable C++ form computing the same quantities.

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define KVSCOPE_CPU_AVX2 1
#endif
