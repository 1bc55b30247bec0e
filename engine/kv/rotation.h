#pragma once
// The seeded orthogonal rotations of the rotated schemes (turbo*, q8_0r, ...). A rotation spreads a
// row's energy evenly over its coordinates, so that each rotated coordinate of
// a unit vector follows (close to) the law of a coordinate of a random unit
// vector in R^d, which the Lloyd-Max codebook is built for.
//
//  - d a power of two: R = H S, H the normalized Walsh-Hadamard matrix
//    (H_ij = (-1)^popcount(i & j) / sqrt(d)) and S a diagonal of +-1 signs.
//  - any other d: a seeded dense orthogonal matrix, the Q factor of the
//    Gram-Schmidt QR of a d x d standard Gaussian matrix (computed in double):
//    a Haar-random rotation. Chosen over block-WHT (Hadamard blocks over
//    the binary pieces of d, e.g. 100 = 64 + 32 + 4) by worst-case round-trip
//    error: equal on isotropic rows, block-WHT up to ~40% better on sparse
//    rows but 4x worse when an outlier channel falls in a small piece, while
//    the Haar rotation gives the codebook's design error for every row
//    (measured in tests/kv/rotation_test.cpp).
// Both are deterministic functions of (d, seed).

#include <cstdint>
#include <span>
#include <vector>

namespace kvscope::kv {

// R as d x d floats, row-major (y = R x).
std::vector<float> makeRotation(uint32_t dim, uint64_t seed);

// The two constructions, separately (tests compare them).
std::vector<float> hadamardRotation(uint32_t dim, uint64_t seed);       // dim a power of two
std::vector<float> blockHadamardRotation(uint32_t dim, uint64_t seed);  // any dim
std::vector<float> denseRotation(uint32_t dim, uint64_t seed);          // any dim

// In place, x = H x for the unnormalized d x d Walsh-Hadamard matrix H
// (H_ij = (-1)^popcount(i & j)), d a power of two: d log2 d float additions.
void fwht(float* x, uint32_t d);

// y = R x and x = R^T y for R = H S / sqrt(d) (hadamardRotation: S the
// diagonal of `signs`, d = signs.size()), in O(d log d) through fwht, in
// float32, scaled by the same float 1/sqrt(d) that R's entries hold.
void hadamardRotate(std::span<const float> signs, const float* x, float* y);
void hadamardRotateBack(std::span<const float> signs, const float* y, float* x);

// y = R x and x = R^T y for a row-major d x d R (double accumulation).
void rotateVector(std::span<const float> r, std::span<const float> x, std::span<float> y);
void rotateVectorBack(std::span<const float> r, std::span<const float> y, std::span<float> x);

// One row stream's R = makeRotation(dim, seed), applied the way the rotated
// schemes encode and decode: through the float32 fast transform when R is a
// Hadamard rotation (its signs kept), else through the dense matrix.
class StreamRotation {
 public:
  StreamRotation(uint32_t dim, uint64_t seed);
  std::span<const float> matrix() const { return m_matrix; }            // d x d, row-major
  std::span<const float> signs() const { return m_signs; }              // empty unless Hadamard
  void rotate(std::span<const float> x, std::span<float> y) const;      // y = R x
  void rotateBack(std::span<const float> y, std::span<float> x) const;  // x = R^T y

 private:
  std::vector<float> m_matrix;
  std::vector<float> m_signs;
};

}  // namespace kvscope::kv
