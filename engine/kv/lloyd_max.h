#pragma once
// Lloyd-Max scalar quantizers (Lloyd 1957/1982, Max 1960): for a density f
// and 2^b levels, the codebook c_0 < ... < c_{2^b-1} minimizing E[(t - c(t))^2]
// when t is sent to its nearest centroid. Found by Lloyd's iteration: the
// boundaries are the midpoints of neighbouring centroids, each centroid is the
// mean of f over its cell; repeat until nothing moves.
//
// Two laws:
//  - a coordinate of a uniformly random unit vector in R^d, density
//    proportional to (1 - t^2)^((d-3)/2) on [-1, 1] (variance 1/d; tends to
//    N(0, 1/d) for large d). The turbo* schemes quantize rotated unit rows
//    with this codebook.
//  - N(0, 1), whose optimal codebooks and distortions Max (1960) tabulated;
//    the tests check the iteration against those tables.

#include <cstdint>
#include <span>
#include <vector>

namespace kvscope::kv {

struct LloydMaxCodebook {
  std::vector<double> centroids;  // ascending, symmetric about 0
  double distortion = 0.0;        // E[(t - c(t))^2] per coordinate
};

// b in 1..4, d >= 4.
LloydMaxCodebook unitVectorCodebook(uint32_t bits, uint32_t dim);
// b in 1..6.
LloydMaxCodebook gaussianCodebook(uint32_t bits);

// unitVectorCodebook(bits, dim) as floats, computed once per (bits, dim) and
// kept for the life of the process (thread-safe).
std::span<const float> cachedUnitVectorCodebook(uint32_t bits, uint32_t dim);
// gaussianCodebook(bits) as floats, cached the same way.
std::span<const float> cachedGaussianCodebook(uint32_t bits);

}  // namespace kvscope::kv
