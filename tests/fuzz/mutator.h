#pragma once
// Mutator: turns a valid file into a slightly broken one, deterministically
// from (seed, input number), so any input a run reports can be made again.
// Each call applies 1 to 8 edits of the kinds that break binary readers:
// flipped bits, bytes and little-endian 16/32/64-bit fields set to boundary
// values (0, 1, -1, the signed extremes, huge sizes), chunks erased,
// duplicated, inserted or taken from another seed file, and truncation.

#include <cstdint>
#include <random>
#include <vector>

namespace kvscope::fuzz {

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : m_rng(seed) {}

  // `input` mutated; `other` (another seed, may be the same) feeds splices.
  std::vector<uint8_t> mutate(const std::vector<uint8_t>& input, const std::vector<uint8_t>& other);

  uint64_t next() { return m_rng(); }

 private:
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(m_rng() % n); }
  void editOnce(std::vector<uint8_t>& data, const std::vector<uint8_t>& other);

  std::mt19937_64 m_rng;
};

}  // namespace kvscope::fuzz
