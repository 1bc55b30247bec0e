#include "kv/lloyd_max.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numbers>
#include <utility>

namespace kvscope::kv {
namespace {

// A law given by its cell integrals: mass(a, b) = P(a < t < b) and
// moment(a, b) = E[t; a < t < b]; `variance` = E[t^2] (the mean is 0).
struct Law {
  std::function<double(double, double)> mass;
  std::function<double(double, double)> moment;
  double variance = 0.0;
  double lo = 0.0, hi = 0.0;  // support
};

LloydMaxCodebook lloyd(const Law& law, uint32_t bits) {
  assert(bits >= 1 && bits <= 6);
  const size_t levels = size_t{1} << bits;
  const double sigma = std::sqrt(law.variance);
  std::vector<double> c(levels);
  // Start evenly spread over +-2 sigma; the iteration converges from any
  // ordered start for these log-concave laws (Fleischer 1964).
  for (size_t i = 0; i < levels; ++i)
    c[i] = sigma * (-2.0 + 4.0 * (static_cast<double>(i) + 0.5) / static_cast<double>(levels));
  std::vector<double> mass(levels);
  for (int iter = 0; iter < 100000; ++iter) {
    double moved = 0.0;
    double a = law.lo;
    for (size_t i = 0; i < levels; ++i) {
      const double b = i + 1 < levels ? 0.5 * (c[i] + c[i + 1]) : law.hi;
      mass[i] = law.mass(a, b);
      const double next = mass[i] > 0.0 ? law.moment(a, b) / mass[i] : c[i];
      moved = std::max(moved, std::fabs(next - c[i]));
      c[i] = next;
      a = b;
    }
    if (moved < 1e-13 * sigma) break;
  }
  // The laws are symmetric: remove the last rounding asymmetry.
  for (size_t i = 0; i < levels / 2; ++i) {
    const double m = 0.5 * (c[levels - 1 - i] - c[i]);
    c[i] = -m;
    c[levels - 1 - i] = m;
  }
  // At a Lloyd-Max fixed point each centroid is its cell's mean, so
  // E[(t - c)^2] = E[t^2] - sum_i P_i c_i^2.
  LloydMaxCodebook out{c, law.variance};
  double a = law.lo;
  for (size_t i = 0; i < levels; ++i) {
    const double b = i + 1 < levels ? 0.5 * (c[i] + c[i + 1]) : law.hi;
    out.distortion -= law.mass(a, b) * c[i] * c[i];
    a = b;
  }
  return out;
}

double normalCdf(double x) {
  return 0.5 * std::erfc(-x / std::numbers::sqrt2);
}
double normalPdf(double x) {
  return std::isinf(x) ? 0.0 : std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi);
}

}  // namespace

LloydMaxCodebook gaussianCodebook(uint32_t bits) {
  Law law;
  law.mass = [](double a, double b) { return normalCdf(b) - normalCdf(a); };
  // Integral of t phi(t) is -phi(t).
  law.moment = [](double a, double b) { return normalPdf(a) - normalPdf(b); };
  law.variance = 1.0;
  law.lo = -INFINITY;
  law.hi = INFINITY;
  return lloyd(law, bits);
}

LloydMaxCodebook unitVectorCodebook(uint32_t bits, uint32_t dim) {
  assert(dim >= 4 && bits <= 4);
  // f(t) = (1 - t^2)^k / Z with k = (d - 3) / 2 and Z = B(1/2, k + 1).
  const double k = (static_cast<double>(dim) - 3.0) / 2.0;
  const double z = std::exp(std::lgamma(0.5) + std::lgamma(k + 1.0) - std::lgamma(k + 1.5));
  auto density = [k, z](double t) { return std::pow(std::max(0.0, 1.0 - t * t), k) / z; };
  // The CDF has no elementary form: tabulate it on a fine grid (trapezoid
  // rule) and finish each lookup with one exact-width trapezoid.
  constexpr int kCells = 1 << 17;
  constexpr double kStep = 2.0 / kCells;
  auto cdfTable = std::make_shared<std::vector<double>>(kCells + 1, 0.0);
  for (int j = 1; j <= kCells; ++j) {
    const double t0 = -1.0 + (j - 1) * kStep, t1 = -1.0 + j * kStep;
    (*cdfTable)[j] = (*cdfTable)[j - 1] + 0.5 * kStep * (density(t0) + density(t1));
  }
  auto cdf = [cdfTable, density](double t) {
    if (t <= -1.0) return 0.0;
    if (t >= 1.0) return cdfTable->back();
    const int j = std::min(kCells - 1, static_cast<int>((t + 1.0) / kStep));
    const double tj = -1.0 + j * kStep;
    return (*cdfTable)[j] + 0.5 * (t - tj) * (density(tj) + density(t));
  };
  Law law;
  law.mass = [cdf](double a, double b) { return cdf(b) - cdf(a); };
  // Integral of t (1 - t^2)^k is -(1 - t^2)^(k+1) / (2 (k + 1)): exact.
  law.moment = [k, z](double a, double b) {
    auto g = [k](double t) { return std::pow(std::max(0.0, 1.0 - t * t), k + 1.0); };
    return (g(a) - g(b)) / (2.0 * (k + 1.0) * z);
  };
  law.variance = 1.0 / dim;
  law.lo = -1.0;
  law.hi = 1.0;
  return lloyd(law, bits);
}

namespace {
// Codebooks as floats, one per (bits, dim), dim 0 for the Gaussian law; built
// once and kept for the life of the process.
std::span<const float> cachedCodebook(uint32_t bits, uint32_t dim) {
  static std::mutex mutex;
  static std::map<std::pair<uint32_t, uint32_t>, std::vector<float>> cache;
  const std::lock_guard lock(mutex);
  auto it = cache.find({bits, dim});
  if (it == cache.end()) {
    const LloydMaxCodebook book = dim == 0 ? gaussianCodebook(bits) : unitVectorCodebook(bits, dim);
    it = cache
             .emplace(std::pair{bits, dim},
                      std::vector<float>(book.centroids.begin(), book.centroids.end()))
             .first;
  }
  return it->second;
}
}  // namespace

std::span<const float> cachedUnitVectorCodebook(uint32_t bits, uint32_t dim) {
  assert(dim >= 4);
  return cachedCodebook(bits, dim);
}

std::span<const float> cachedGaussianCodebook(uint32_t bits) {
  return cachedCodebook(bits, 0);
}

}  // namespace kvscope::kv
