#include "kv/rotation.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <numbers>

#include "kv/splitmix.h"

namespace kvscope::kv {
namespace {

// 1 / sqrt(n) rounded once to float: the entries of H / sqrt(n), and the
// factor of the fast transform, so both give the same floats.
float hadamardNorm(uint32_t n) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(n)));
}

// Writes the randomized Hadamard block H S of size n (a power of two) into the
// d x d matrix r at rows/columns [at, at + n).
void writeHadamardBlock(std::vector<float>& r, uint32_t d, uint32_t at, uint32_t n,
                        SplitMix64& rng) {
  std::vector<float> sign(n);
  for (float& s : sign) s = (rng.next() >> 63) ? -1.0f : 1.0f;
  const float norm = hadamardNorm(n);
  for (uint32_t i = 0; i < n; ++i) {
    for (uint32_t j = 0; j < n; ++j) {
      const float h = (std::popcount(i & j) & 1) ? -norm : norm;
      r[size_t{at + i} * d + at + j] = h * sign[j];
    }
  }
}

}  // namespace

std::vector<float> hadamardRotation(uint32_t dim, uint64_t seed) {
  assert(std::has_single_bit(dim));
  std::vector<float> r(size_t{dim} * dim, 0.0f);
  SplitMix64 rng(seed);
  writeHadamardBlock(r, dim, 0, dim, rng);
  return r;
}

std::vector<float> blockHadamardRotation(uint32_t dim, uint64_t seed) {
  std::vector<float> r(size_t{dim} * dim, 0.0f);
  SplitMix64 rng(seed);
  uint32_t at = 0;
  for (uint32_t rest = dim; rest > 0;) {
    const uint32_t n = std::bit_floor(rest);
    writeHadamardBlock(r, dim, at, n, rng);
    at += n;
    rest -= n;
  }
  return r;
}

std::vector<float> denseRotation(uint32_t dim, uint64_t seed) {
  // Rows of a Gaussian matrix (Box-Muller), orthonormalized in order by
  // Gram-Schmidt applied twice (one pass loses orthogonality in float-ish
  // ways for large d; two passes are exact to double rounding). The Q of a
  // Gaussian matrix with positive R diagonal is Haar distributed.
  const size_t d = dim;
  SplitMix64 rng(seed);
  std::vector<double> q(d * d);
  for (size_t i = 0; i < d * d; i += 2) {
    const double radius = std::sqrt(-2.0 * std::log(rng.uniform()));
    const double angle = 2.0 * std::numbers::pi * rng.uniform();
    q[i] = radius * std::cos(angle);
    if (i + 1 < d * d) q[i + 1] = radius * std::sin(angle);
  }
  for (size_t i = 0; i < d; ++i) {
    double* qi = &q[i * d];
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t j = 0; j < i; ++j) {
        const double* qj = &q[j * d];
        double dot = 0.0;
        for (size_t k = 0; k < d; ++k) dot += qi[k] * qj[k];
        for (size_t k = 0; k < d; ++k) qi[k] -= dot * qj[k];
      }
    }
    double norm = 0.0;
    for (size_t k = 0; k < d; ++k) norm += qi[k] * qi[k];
    norm = std::sqrt(norm);
    for (size_t k = 0; k < d; ++k) qi[k] /= norm;
  }
  return std::vector<float>(q.begin(), q.end());
}

std::vector<float> makeRotation(uint32_t dim, uint64_t seed) {
  return std::has_single_bit(dim) ? hadamardRotation(dim, seed) : denseRotation(dim, seed);
}

void fwht(float* x, uint32_t d) {
  assert(std::has_single_bit(d));
  for (uint32_t len = 1; len < d; len *= 2) {
    for (uint32_t i = 0; i < d; i += 2 * len) {
      for (uint32_t j = i; j < i + len; ++j) {
        const float a = x[j], b = x[j + len];
        x[j] = a + b;
        x[j + len] = a - b;
      }
    }
  }
}

void hadamardRotate(std::span<const float> signs, const float* x, float* y) {
  const auto d = static_cast<uint32_t>(signs.size());
  for (uint32_t i = 0; i < d; ++i) y[i] = x[i] * signs[i];
  fwht(y, d);
  const float norm = hadamardNorm(d);
  for (uint32_t i = 0; i < d; ++i) y[i] *= norm;
}

void hadamardRotateBack(std::span<const float> signs, const float* y, float* x) {
  const auto d = static_cast<uint32_t>(signs.size());
  std::copy_n(y, d, x);
  fwht(x, d);
  const float norm = hadamardNorm(d);
  for (uint32_t i = 0; i < d; ++i) x[i] *= norm * signs[i];
}

void rotateVector(std::span<const float> r, std::span<const float> x, std::span<float> y) {
  const size_t d = x.size();
  assert(r.size() == d * d && y.size() == d);
  for (size_t i = 0; i < d; ++i) {
    double sum = 0.0;
    for (size_t j = 0; j < d; ++j) sum += double{r[i * d + j]} * x[j];
    y[i] = static_cast<float>(sum);
  }
}

void rotateVectorBack(std::span<const float> r, std::span<const float> y, std::span<float> x) {
  const size_t d = y.size();
  assert(r.size() == d * d && x.size() == d);
  std::vector<double> sum(d, 0.0);
  for (size_t i = 0; i < d; ++i)
    for (size_t j = 0; j < d; ++j) sum[j] += double{r[i * d + j]} * y[i];
  for (size_t j = 0; j < d; ++j) x[j] = static_cast<float>(sum[j]);
}

StreamRotation::StreamRotation(uint32_t dim, uint64_t seed) : m_matrix(makeRotation(dim, seed)) {
  if (std::has_single_bit(dim)) {
    // makeRotation's H S / sqrt(d): H's first row is all +1, so R's first
    // row carries the signs.
    for (uint32_t j = 0; j < dim; ++j) m_signs.push_back(m_matrix[j] > 0 ? 1.0f : -1.0f);
  }
}

void StreamRotation::rotate(std::span<const float> x, std::span<float> y) const {
  if (m_signs.empty()) return rotateVector(m_matrix, x, y);
  hadamardRotate(m_signs, x.data(), y.data());
}

void StreamRotation::rotateBack(std::span<const float> y, std::span<float> x) const {
  if (m_signs.empty()) return rotateVectorBack(m_matrix, y, x);
  hadamardRotateBack(m_signs, y.data(), x.data());
}

}  // namespace kvscope::kv
