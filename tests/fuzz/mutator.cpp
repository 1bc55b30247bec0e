#include "fuzz/mutator.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <limits>

namespace kvscope::fuzz {
namespace {

// Values that sit on the edges readers check (or forget to): empty, one,
// all ones, sign boundaries, and sizes that overflow when multiplied or added.
constexpr std::array<uint64_t, 12> kBoundaries = {
    0,
    1,
    0xFF,
    0x7F,
    0x80,
    0xFFFF,
    0x7FFFFFFF,
    0x80000000,
    0xFFFFFFFF,
    0x7FFFFFFFFFFFFFFF,
    0xFFFFFFFFFFFFFFFF,
    uint64_t{1} << 40,
};

}  // namespace

std::vector<uint8_t> Mutator::mutate(const std::vector<uint8_t>& input,
                                     const std::vector<uint8_t>& other) {
  std::vector<uint8_t> data = input;
  const size_t edits = 1 + below(8);
  for (size_t i = 0; i < edits; ++i) editOnce(data, other);
  return data;
}

void Mutator::editOnce(std::vector<uint8_t>& data, const std::vector<uint8_t>& other) {
  const size_t n = data.size();
  switch (below(8)) {
    case 0:  // flip one bit
      if (n) data[below(n)] ^= static_cast<uint8_t>(1u << below(8));
      break;
    case 1:  // one byte to a boundary or random value
      if (n) data[below(n)] = static_cast<uint8_t>(below(2) ? kBoundaries[below(5)] : next());
      break;
    case 2: {  // a little-endian field of 2, 4 or 8 bytes to a boundary value
      const size_t width = size_t{2} << below(3);
      if (n < width) break;
      uint64_t v = kBoundaries[below(kBoundaries.size())];
      if (below(4) == 0) v += below(16);  // just past a boundary
      const size_t at = below(n - width + 1);
      for (size_t b = 0; b < width; ++b) data[at + b] = static_cast<uint8_t>(v >> (8 * b));
      break;
    }
    case 3:  // truncate
      data.resize(below(n + 1));
      break;
    case 4: {  // erase a chunk
      if (!n) break;
      const size_t at = below(n);
      const size_t len = 1 + below(std::min<size_t>(n - at, 64));
      data.erase(data.begin() + static_cast<std::ptrdiff_t>(at),
                 data.begin() + static_cast<std::ptrdiff_t>(at + len));
      break;
    }
    case 5: {  // duplicate a chunk in place
      if (!n) break;
      const size_t at = below(n);
      const size_t len = 1 + below(std::min<size_t>(n - at, 64));
      const std::vector<uint8_t> chunk(data.begin() + static_cast<std::ptrdiff_t>(at),
                                       data.begin() + static_cast<std::ptrdiff_t>(at + len));
      data.insert(data.begin() + static_cast<std::ptrdiff_t>(at), chunk.begin(), chunk.end());
      break;
    }
    case 6: {  // insert random bytes
      const size_t at = below(n + 1);
      std::vector<uint8_t> bytes(1 + below(16));
      for (uint8_t& b : bytes) b = static_cast<uint8_t>(next());
      data.insert(data.begin() + static_cast<std::ptrdiff_t>(at), bytes.begin(), bytes.end());
      break;
    }
    default: {  // overwrite with a chunk of another seed at the same or any offset
      if (!n || other.empty()) break;
      const size_t from = below(other.size());
      const size_t len = 1 + below(std::min<size_t>(other.size() - from, 256));
      const size_t at = below(2) ? std::min(from, n - 1) : below(n);
      for (size_t b = 0; b < len && at + b < n; ++b) data[at + b] = other[from + b];
      break;
    }
  }
}

}  // namespace kvscope::fuzz
