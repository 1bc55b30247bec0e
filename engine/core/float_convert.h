#pragma once
// Scalar conversions between float32 and the narrow formats the engine stores:
// IEEE fp16, bfloat16, OCP FP8 E4M3 ("e4m3fn": no infinities, max 448) and
// UE8M0 (an unsigned power-of-two exponent byte used as a block scale).
// All float32 -> narrow conversions round to nearest, ties to even, the same
// rule GPUs use, so the CPU reference and the shaders agree bit for bit.

#include <cstdint>
#include <cstring>
#include <span>

namespace kvscope {

float fp16ToFloat(uint16_t h);
uint16_t floatToFp16(float f);  // saturates nothing: overflow gives +-inf like IEEE
// f rounded to the nearest fp16 value, as a float.
inline float roundToFp16(float f) {
  return fp16ToFloat(floatToFp16(f));
}

float bf16ToFloat(uint16_t b);
uint16_t floatToBf16(float f);

float e4m3ToFloat(uint8_t v);
uint8_t floatToE4m3(float f);  // saturates to +-448; NaN -> 0x7f
inline constexpr float kE4m3Max = 448.0f;

// UE8M0: value = 2^(e - 127); e = 0xff is NaN. Built from the float's bits
// (e = 0 is the subnormal 2^-127), inline for the decode kernels.
inline float ue8m0ToFloat(uint8_t e) {
  const uint32_t bits = e == 0xff ? 0x7fc00000u : e == 0 ? 0x00400000u : uint32_t{e} << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
// The smallest power of two >= f (f > 0), as a UE8M0 byte, clamped to the range.
uint8_t floatToUe8m0Ceil(float f);

void fp16ToFloat(std::span<const uint16_t> in, std::span<float> out);
void floatToFp16(std::span<const float> in, std::span<uint16_t> out);

}  // namespace kvscope
