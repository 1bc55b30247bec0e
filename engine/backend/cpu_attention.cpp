#include "backend/cpu_attention.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

#include "backend/cpu_matmul.h"
#include "core/float_convert.h"
#include "kv/rotation.h"

namespace kvscope::cpu {

using kv::KvPart;

void attention(const kv::KvCache& cache, uint32_t layer, const float* q, uint32_t n, uint32_t pos0,
               uint32_t nHead, ThreadPool& pool, float* out) {
  const uint32_t d = cache.geometry().headDim, gqa = nHead / cache.geometry().nHeadKv;
  assert(gqa > 0 && nHead % cache.geometry().nHeadKv == 0);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const kv::KvScheme& keys = cache.scheme(layer, KvPart::kKey);
  const kv::KvScheme& values = cache.scheme(layer, KvPart::kValue);
  const bool roundToF16 = keys.name() == "f16" && values.name() == "f16";
  pool.parallelFor(size_t{n} * nHead, [&](size_t begin, size_t end) {
    std::vector<float> scores(pos0 + n), row(d), acc(d), qh(d), rotated(d);
    for (size_t job = begin; job < end; ++job) {
      const uint32_t t = static_cast<uint32_t>(job / nHead), h = static_cast<uint32_t>(job % nHead);
      const uint32_t kvHead = h / gqa, visible = pos0 + t + 1;
      std::copy_n(q + (size_t{t} * nHead + h) * d, d, qh.begin());
      if (roundToF16) std::transform(qh.begin(), qh.end(), qh.begin(), roundToFp16);
      if (keys.rotated()) {
        kv::rotateVector(keys.rotation(), qh, rotated);
        qh.swap(rotated);
      }
      float maxScore = -INFINITY;
      for (uint32_t j = 0; j < visible; ++j) {
        cache.readRotated(layer, KvPart::kKey, kvHead, j, row);
        scores[j] = dot(qh.data(), row.data(), d) * scale;
        maxScore = std::max(maxScore, scores[j]);
      }
      float sum = 0.0f;
      for (uint32_t j = 0; j < visible; ++j) sum += (scores[j] = std::exp(scores[j] - maxScore));
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (uint32_t j = 0; j < visible; ++j) {
        cache.readRotated(layer, KvPart::kValue, kvHead, j, row);
        float w = scores[j] / sum;
        if (roundToF16) w = roundToFp16(w);
        for (uint32_t i = 0; i < d; ++i) acc[i] += w * row[i];
      }
      float* o = out + (size_t{t} * nHead + h) * d;
      if (values.rotated())
        kv::rotateVectorBack(values.rotation(), acc, {o, d});
      else
        std::copy(acc.begin(), acc.end(), o);
    }
  });
}

}  // namespace kvscope::cpu
