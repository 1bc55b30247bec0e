#pragma once
// splitmix64 (Steele, Lea, Flood 2014): the one seeded generator of the KV
// layer. Every random choice a scheme makes (rotation signs, the dense
// rotation's Gaussian matrix) and every per-stream seed comes from it, so a
// cache seed determines the whole cache.

#include <cstdint>

namespace kvscope::kv {

// The splitmix64 output function: a bijective 64-bit mix.
inline uint64_t splitmixMix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : m_state(seed) {}
  uint64_t next() { return splitmixMix(m_state += 0x9e3779b97f4a7c15ull); }
  // Uniform in (0, 1): 53 random bits, never exactly 0.
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }

 private:
  uint64_t m_state;
};

}  // namespace kvscope::kv
