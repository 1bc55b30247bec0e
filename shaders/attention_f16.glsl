// float32 -> IEEE binary16 with round to nearest, ties to even, in integer
// arithmetic: bit-exact with kvscope::floatToFp16 on every device, where
// packHalf2x16's rounding is left to the driver and f16 subnormals may be
// flushed.
#ifndef KVSCOPE_ATTENTION_F16_GLSL
#define KVSCOPE_ATTENTION_F16_GLSL

// The binary16 bits of the float32 with bits `x`.
uint halfBits(uint x) {
  const uint sign = (x >> 16) & 0x8000u;
  const uint absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return sign | (absx > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (absx >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: infinity
  if (absx < 0x38800000u) {
    // Subnormal half: |x| * 2^24 = m * 2^(e - 126) rounded to an integer.
    const uint e = absx >> 23;
    if (e < 102u) return sign;  // below 2^-25: rounds to zero
    const uint m = (absx & 0x7fffffu) | 0x800000u;
    const uint shift = 126u - e;  // 14 .. 24
    const uint q = m >> shift, rem = m & ((1u << shift) - 1u), tie = 1u << (shift - 1u);
    return sign | (q + uint(rem > tie || (rem == tie && (q & 1u) != 0u)));
  }
  const uint v = absx - 0x38000000u;  // rebias the exponent 127 -> 15
  return sign | ((v + 0x0fffu + ((v >> 13) & 1u)) >> 13);
}

// The float32 value of x rounded to binary16 (what fp16ToFloat(floatToFp16(x))
// gives), computed without f16 arithmetic.
float roundToHalf(float x) {
  const uint bits = floatBitsToUint(x);
  const uint absx = bits & 0x7fffffffu;
  const uint sign = bits & 0x80000000u;
  if (absx >= 0x7f800000u) return x;
  if (absx >= 0x477ff000u) return uintBitsToFloat(sign | 0x7f800000u);
  if (absx < 0x38800000u) {  // subnormal half: a multiple of 2^-24
    const float r = roundEven(uintBitsToFloat(absx) * 16777216.0) * (1.0 / 16777216.0);
    return sign != 0u ? -r : r;
  }
  return uintBitsToFloat(sign | ((absx + 0x0fffu + ((absx >> 13) & 1u)) & 0xffffe000u));
}

#endif
