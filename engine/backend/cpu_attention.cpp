#include "backend/cpu_attention.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cmath>
#include <vector>

#include "backend/cpu_attention_tile.h"
#include "backend/cpu_kv_rows.h"
#include "backend/cpu_matmul.h"
#include "core/float_convert.h"
#include "kv/rotation.h"

namespace kvscope::cpu {

using kv::KvPart;

void attentionReference(const kv::KvCache& cache, uint32_t layer, const float* q, uint32_t n,
                        uint32_t pos0, uint32_t nHead, ThreadPool& pool, float* out,
                        float scaleOrZero, uint32_t window, const float* sinks) {
  const kv::KvGeometry& g = cache.geometry();
  const uint32_t d = g.headDim(layer), gqa = nHead / g.nHeadKv(layer);
  assert(gqa > 0 && nHead % g.nHeadKv(layer) == 0);
  const float scale = scaleOrZero != 0.0f ? scaleOrZero : 1.0f / std::sqrt(static_cast<float>(d));
  const kv::KvScheme& keys = cache.scheme(layer, KvPart::kKey);
  const kv::KvScheme& values = cache.scheme(layer, KvPart::kValue);
  const bool roundToF16 =
      keys.rowCode() == kv::RowCode::kF16 && values.rowCode() == kv::RowCode::kF16;
  pool.parallelFor(size_t{n} * nHead, [&](size_t begin, size_t end) {
    std::vector<float> scores(pos0 + n), row(d), acc(d), qh(d), rotated(d);
    for (size_t job = begin; job < end; ++job) {
      const uint32_t t = static_cast<uint32_t>(job / nHead), h = static_cast<uint32_t>(job % nHead);
      const uint32_t kvHead = h / gqa, visible = pos0 + t + 1;
      const uint32_t from = window != 0 && visible > window ? visible - window : 0;
      std::copy_n(q + (size_t{t} * nHead + h) * d, d, qh.begin());
      if (roundToF16) std::transform(qh.begin(), qh.end(), qh.begin(), roundToFp16);
      if (keys.rotated()) {
        kv::rotateVector(keys.rotation(), qh, rotated);
        qh.swap(rotated);
      }
      float maxScore = sinks ? sinks[h] : -INFINITY;
      for (uint32_t j = from; j < visible; ++j) {
        cache.readAttended(layer, KvPart::kKey, kvHead, j, visible - 1, row);
        scores[j] = dot(qh.data(), row.data(), d) * scale;
        maxScore = std::max(maxScore, scores[j]);
      }
      float sum = sinks ? std::exp(sinks[h] - maxScore) : 0.0f;
      for (uint32_t j = from; j < visible; ++j) sum += (scores[j] = std::exp(scores[j] - maxScore));
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (uint32_t j = from; j < visible; ++j) {
        cache.readAttended(layer, KvPart::kValue, kvHead, j, visible - 1, row);
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

void rotateRow(const kv::KvScheme& s, const float* x, float* y) {
  if (const auto signs = s.hadamardSigns(); !signs.empty()) return kv::hadamardRotate(signs, x, y);
  const uint32_t d = s.dim();
  const auto r = s.rotation();
  for (uint32_t i = 0; i < d; ++i) y[i] = dot(&r[size_t{i} * d], x, d);
}

void rotateRowBack(const kv::KvScheme& s, const float* y, float* x) {
  if (const auto signs = s.hadamardSigns(); !signs.empty())
    return kv::hadamardRotateBack(signs, y, x);
  const uint32_t d = s.dim();
  const auto r = s.rotation();
  std::fill_n(x, d, 0.0f);
  for (uint32_t i = 0; i < d; ++i) {
    const float yi = y[i];
    const float* __restrict row = &r[size_t{i} * d];
    float* __restrict out = x;
    for (uint32_t j = 0; j < d; ++j) out[j] += yi * row[j];
  }
}

namespace {

using tile::kLanes;
using tile::kRows;

// The work of one call: the query vectors of each KV head (token t, head g of
// the GQA group, numbered t * gqa + g) in groups of kLanes. A job takes
// `perJob` consecutive groups, which share every decoded tile (prefill), or
// one group and one of `chunks` pieces of its positions (decode).
struct Plan {
  uint32_t d = 0, stride = 0, gqa = 0, nHead = 0, nHeadKv = 0, n = 0, pos0 = 0;
  uint32_t groups = 0;  // per KV head
  uint32_t perJob = 1;  // groups per job
  uint32_t chunks = 1;  // position chunks per job
  uint32_t jobsPerHead() const { return (groups + perJob - 1) / perJob; }
  uint32_t jobs() const { return nHeadKv * jobsPerHead() * chunks; }
};

constexpr uint32_t kMaxGroupsPerJob = 4;

// Per-thread buffers, sized by each call.
struct Scratch {
  std::vector<float> q, k, v, scores, acc, tmp;
  std::vector<float> band;      // [group][row][lane]: a band tile's tail scores, then tail weights
  std::vector<ActBlock> qInt8;  // [group][lane][d / 32]: queries for int8 key scoring
  void size(const Plan& p, size_t scoreRows) {
    qInt8.resize(size_t{kMaxGroupsPerJob} * kLanes * (p.d / kActBlock));
    q.assign(size_t{kMaxGroupsPerJob} * kLanes * p.stride, 0.0f);  // tails past d stay zero
    k.assign(size_t{kRows} * p.stride, 0.0f);
    v.assign(size_t{kRows} * p.stride, 0.0f);
    const size_t scoreFloats = size_t{kMaxGroupsPerJob} * scoreRows * kLanes;
    if (scores.size() < scoreFloats) scores.resize(scoreFloats);
    acc.resize(size_t{kMaxGroupsPerJob} * kLanes * p.stride);
    band.resize(size_t{kMaxGroupsPerJob} * kRows * kLanes);
    tmp.resize(p.stride);
  }
};

// The groups and rows of one job.
struct Span {
  uint32_t h = 0;                                            // KV head
  uint32_t groups = 0;                                       // groups in the job
  uint32_t v0[kMaxGroupsPerJob] = {};                        // first query vector of each group
  uint32_t nq[kMaxGroupsPerJob] = {};                        // query vectors in each group
  alignas(32) uint32_t last[kMaxGroupsPerJob][kLanes] = {};  // last visible position per lane
  alignas(32) uint32_t from[kMaxGroupsPerJob][kLanes] = {};  // first visible position (a window)
  uint32_t begin = 0, end = 0;                               // the rows [begin, end) the job reads
  // The precision tail: the first row each lane reads from it, and their
  // least and greatest (rows below tailLo are read as codes by every lane,
  // rows from tailHi from the tail by every lane; ~0u: no tail).
  alignas(32) uint32_t tail[kMaxGroupsPerJob][kLanes] = {};
  uint32_t tailLo = ~0u, tailHi = ~0u;
};

// How the lanes of a job read a tile of one stream: all through its codes,
// all from the precision tail, or (a band tile) some each way.
enum class TileSource { kCodes, kTail, kBand };

// The tile of rows of one job's read: consecutive cached rows from position
// `pos`, within one run and one page, and on one side of the job's tail
// bounds (and within one run of the tail's ring).
struct Tile {
  uint32_t pos = 0, rows = 0;
};

// One call of attention(): its plan, what it reads and the passes of a job.
class AttentionRun {
 public:
  AttentionRun(const kv::KvCache& cache, uint32_t layer, const float* q, uint32_t n, uint32_t pos0,
               uint32_t nHead, ThreadPool& pool, float* out, const AttentionOptions& options);
  void run();

 private:
  // The rows each KV head reads, in cache order: every visible row, or (an
  // indexed decode step) the runs its selection lists. A job's rows
  // [begin, end) count in that order; m_runStart[h][r] is where run r starts.
  void indexSelection();
  // Enough jobs to keep every thread busy to the end: split positions when
  // there are few groups (decode: one or two per KV head), keeping at least
  // 4 tiles per chunk; else let up to 4 groups share each decoded tile.
  void planJobs();
  bool sparse(uint32_t h) const { return m_selection && !(*m_selection)[h].empty(); }
  // The query vector numbered v of KV head h: its token and its row in q/out.
  size_t vectorRow(uint32_t h, uint32_t v) const {
    return (size_t{v / m_p.gqa} * m_p.nHead + h * m_p.gqa + v % m_p.gqa) * m_p.d;
  }
  // 1 / the softmax denominator of a query vector whose scores have maximum
  // `max` and exps (relative to it) summing to `sum`, its head's sink joined;
  // the exps are then also relative to the sink where it is the larger.
  float normalizer(uint32_t h, uint32_t v, float max, float sum) const {
    if (!m_options.sinks) return 1.0f / sum;
    const float sink = m_options.sinks[h * m_p.gqa + v % m_p.gqa];
    if (sink <= max) return 1.0f / (sum + std::exp(sink - max));
    const float shift = std::exp(max - sink);
    return shift / (sum * shift + 1.0f);
  }
  Span span(uint32_t job) const;
  Tile tileAt(const Span& sp, uint32_t j) const;
  TileSource source(const Span& sp, const Tile& t, bool tail) const {
    if (!tail || t.pos + t.rows <= sp.tailLo) return TileSource::kCodes;
    return t.pos >= sp.tailHi ? TileSource::kTail : TileSource::kBand;
  }
  float* scoresOf(const Span& sp, Scratch& s, uint32_t k) const;
  void scorePass(const Span& sp, Scratch& s, float (*max)[kLanes], float (*sum)[kLanes]) const;
  void valuePass(const Span& sp, Scratch& s, const float (*factor)[kLanes]) const;
  void bandValues(const Span& sp, Scratch& s, const Tile& t, float* const* tiles) const;
  void finish(uint32_t h, uint32_t v, const float* acc) const;
  template <typename Body>
  void forEachJob(const Body& body) const;
  void runWhole() const;    // one pass per job over all its rows
  void runChunked() const;  // chunks of positions per group, merged (flash-decoding)

  const kv::KvCache& m_cache;
  const uint32_t m_layer;
  const float* m_q;
  float* m_out;
  ThreadPool& m_pool;
  const AttentionOptions& m_options;
  const kv::KvScheme& m_keys;
  const kv::KvScheme& m_values;
  const std::vector<std::vector<kv::RowRun>>* m_selection;
  Plan m_p;
  std::vector<std::vector<uint32_t>> m_runStart;  // [nHeadKv][run]
  uint32_t m_readRows = 0;                        // the most rows a head reads
  uint32_t m_positions = 0;                       // pos0 + n
  size_t m_threads = 1;
  bool m_roundToF16 = false, m_int8Keys = false;
  uint32_t m_keyBlocks = 0;
  float m_scale = 0.0f;
  KvRowDecoder m_keyRows, m_valueRows;
  // The precision tail: whether K and V keep one, and its f16 rows' decoder.
  bool m_tail = false;
  KvRowDecoder m_tailRows;
  // Chunked jobs (one group each) keep their scores (then exps) between the
  // two passes in m_chunkScores, [group][position][lane], and leave per job
  // the max and the sum of exps of their chunk ([job][lane]) and their
  // weighted V sums ([job][lane][stride]) for the merge.
  float *m_chunkScores = nullptr, *m_partMax = nullptr, *m_partSum = nullptr, *m_partAcc = nullptr;
};

AttentionRun::AttentionRun(const kv::KvCache& cache, uint32_t layer, const float* q, uint32_t n,
                           uint32_t pos0, uint32_t nHead, ThreadPool& pool, float* out,
                           const AttentionOptions& options)
    : m_cache(cache),
      m_layer(layer),
      m_q(q),
      m_out(out),
      m_pool(pool),
      m_options(options),
      m_keys(cache.scheme(layer, KvPart::kKey)),
      m_values(cache.scheme(layer, KvPart::kValue)),
      m_selection(options.selection),
      m_keyRows(m_keys, options.portable),
      m_valueRows(m_values, options.portable),
      m_tail(cache.hasTail(layer)),
      m_tailRows(cache.tailScheme(layer), options.portable) {
  const kv::KvGeometry& g = cache.geometry();
  assert(nHead % g.nHeadKv(layer) == 0 && nHead >= g.nHeadKv(layer));
  m_p.d = g.headDim(layer);
  m_p.stride = (m_p.d + 7) / 8 * 8;
  m_p.gqa = nHead / g.nHeadKv(layer);
  m_p.nHead = nHead;
  m_p.nHeadKv = g.nHeadKv(layer);
  m_p.n = n;
  m_p.pos0 = pos0;
  m_p.groups = (n * m_p.gqa + kLanes - 1) / kLanes;
  m_positions = pos0 + n;
  m_roundToF16 = m_keys.rowCode() == kv::RowCode::kF16 && m_values.rowCode() == kv::RowCode::kF16;
  m_int8Keys =
      options.int8Queries && m_keys.rowCode() == kv::RowCode::kQ8_0 && m_p.d % kActBlock == 0;
  m_keyBlocks = m_p.d / kActBlock;
  m_scale = options.scale != 0.0f ? options.scale : 1.0f / std::sqrt(static_cast<float>(m_p.d));
  indexSelection();
  planJobs();
}

void AttentionRun::indexSelection() {
  assert(!m_selection || (m_p.n == 1 && m_selection->size() == m_p.nHeadKv));
  m_readRows =
      m_options.window != 0 ? std::min(m_positions, m_options.window + m_p.n - 1) : m_positions;
  if (!m_selection) return;
  m_runStart.resize(m_p.nHeadKv);
  m_readRows = 0;
  for (uint32_t h = 0; h < m_p.nHeadKv; ++h) {
    uint32_t count = 0;
    for (const kv::RowRun& r : (*m_selection)[h]) {
      m_runStart[h].push_back(count);
      count += r.end - r.begin;
    }
    m_readRows = std::max(m_readRows, (*m_selection)[h].empty() ? m_positions : count);
  }
}

void AttentionRun::planJobs() {
  const uint32_t wanted = 4 * m_pool.size(), groups = m_p.nHeadKv * m_p.groups;
  if (groups < wanted) {
    m_p.chunks = std::max(1u, std::min((wanted + groups - 1) / groups, m_readRows / (4 * kRows)));
  } else {
    m_p.perJob = std::clamp(groups / (4 * wanted), 1u, kMaxGroupsPerJob);
  }
  const double rowsPerQuery =
      m_selection || m_options.window != 0 ? m_readRows : m_p.pos0 + m_p.n / 2.0;
  const double macs = 2.0 * m_p.n * m_p.nHead * rowsPerQuery * m_p.d;
  m_threads = macs < static_cast<double>(kMinTaskMacs) ? 1 : m_pool.size();
  if (m_p.chunks == 1) return;
  // Every value is written before it is read, so the buffers are kept (per
  // calling thread) and only grown: zeroing them per call cost a decode step
  // of a 4K context ~4 MB of memset.
  thread_local std::vector<float> chunkScores, parts;
  const size_t scoreFloats = size_t{m_p.nHeadKv} * m_p.groups * m_positions * kLanes;
  const size_t lanes = size_t{m_p.jobs()} * kLanes;
  if (chunkScores.size() < scoreFloats) chunkScores.resize(scoreFloats);
  if (parts.size() < lanes * (2 + m_p.stride)) parts.resize(lanes * (2 + m_p.stride));
  m_chunkScores = chunkScores.data();
  m_partMax = parts.data();
  m_partSum = m_partMax + lanes;
  m_partAcc = m_partSum + lanes;
}

// Jobs run latest tokens (most rows) first, so uneven causal prefill work
// still ends together.
Span AttentionRun::span(uint32_t job) const {
  const Plan& p = m_p;
  Span sp;
  const uint32_t chunk = job % p.chunks, rest = job / p.chunks;
  sp.h = rest % p.nHeadKv;
  const uint32_t slot = p.jobsPerHead() - 1 - rest / p.nHeadKv;
  const uint32_t g0 = slot * p.perJob;
  sp.groups = std::min(p.perJob, p.groups - g0);
  // The rows [lo, visible) some query of the job sees.
  uint32_t visible = 0, lo = ~0u;
  const uint32_t window = m_options.window;
  for (uint32_t k = 0; k < sp.groups; ++k) {
    sp.v0[k] = (g0 + k) * kLanes;
    sp.nq[k] = std::min(kLanes, p.n * p.gqa - sp.v0[k]);
    for (uint32_t i = 0; i < kLanes; ++i) {
      const uint32_t last = p.pos0 + (sp.v0[k] + std::min(i, sp.nq[k] - 1)) / p.gqa;
      sp.last[k][i] = last;
      sp.from[k][i] = window != 0 && last >= window ? last + 1 - window : 0;
      lo = std::min(lo, sp.from[k][i]);
    }
    visible = std::max(visible, sp.last[k][sp.nq[k] - 1] + 1);
    for (uint32_t i = 0; m_tail && i < kLanes; ++i)
      sp.tail[k][i] = m_cache.tailStart(m_layer, sp.last[k][i]);
  }
  if (m_tail) {
    sp.tailLo = *std::min_element(&sp.tail[0][0], &sp.tail[0][0] + sp.groups * kLanes);
    sp.tailHi = *std::max_element(&sp.tail[0][0], &sp.tail[0][0] + sp.groups * kLanes);
  }
  if (sparse(sp.h)) {  // counted in the selection's order, which starts at 0
    const kv::RowRun& lastRun = (*m_selection)[sp.h].back();
    visible = m_runStart[sp.h].back() + lastRun.end - lastRun.begin;
    lo = 0;
  }
  const uint32_t len = ((visible - lo + p.chunks - 1) / p.chunks + kRows - 1) / kRows * kRows;
  sp.begin = std::min(visible, lo + chunk * len);
  sp.end = std::min(visible, sp.begin + len);
  return sp;
}

// The tile that starts at row j (in the head's order) of the job.
Tile AttentionRun::tileAt(const Span& sp, uint32_t j) const {
  Tile t{j, std::min({kRows, sp.end - j})};
  if (sparse(sp.h)) {
    const auto& starts = m_runStart[sp.h];
    const size_t r =
        static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), j) - starts.begin()) - 1;
    const kv::RowRun& run = (*m_selection)[sp.h][r];
    t.pos = run.begin + (j - starts[r]);
    t.rows = std::min(t.rows, run.end - t.pos);
  }
  const uint32_t pageRows = m_cache.layout().pageRows(m_layer);
  t.rows = std::min(t.rows, pageRows - t.pos % pageRows);
  if (t.pos < sp.tailLo) {
    t.rows = std::min(t.rows, sp.tailLo - t.pos);
  } else {
    const uint32_t slots = m_cache.geometry().tailRingRows;
    t.rows = std::min(t.rows, slots - t.pos % slots);
    if (t.pos < sp.tailHi) t.rows = std::min(t.rows, sp.tailHi - t.pos);
  }
  return t;
}

// Scores of group k of a job: [row - begin][lane].
float* AttentionRun::scoresOf(const Span& sp, Scratch& s, uint32_t k) const {
  if (m_p.chunks > 1) {
    return &m_chunkScores[((size_t{sp.h} * m_p.groups + sp.v0[0] / kLanes) * m_positions +
                           sp.begin) *
                          kLanes];
  }
  return &s.scores[size_t{k} * m_positions * kLanes];
}

// Pass 1: scores of the span's rows, masked, their max and exp(s - max).
void AttentionRun::scorePass(const Span& sp, Scratch& s, float (*max)[kLanes],
                             float (*sum)[kLanes]) const {
  const Plan& p = m_p;
  const bool portable = m_options.portable;
  for (uint32_t k = 0; k < sp.groups; ++k) {
    for (uint32_t i = 0; i < sp.nq[k]; ++i) {
      float* qi = &s.q[(size_t{k} * kLanes + i) * p.stride];
      std::copy_n(m_q + vectorRow(sp.h, sp.v0[k] + i), p.d, s.tmp.data());
      if (m_roundToF16)
        std::transform(s.tmp.begin(), s.tmp.begin() + p.d, s.tmp.begin(), roundToFp16);
      if (m_keys.rotated()) {
        rotateRow(m_keys, s.tmp.data(), qi);
      } else {
        std::copy_n(s.tmp.data(), p.d, qi);
      }
      for (uint32_t c = 0; c < p.d; ++c) qi[c] *= m_scale;
      if (m_int8Keys)
        quantizeActivations(qi, p.d, &s.qInt8[(size_t{k} * kLanes + i) * m_keyBlocks], portable);
    }
    std::fill_n(max[k], kLanes, -INFINITY);
    std::fill_n(sum[k], kLanes, 0.0f);
  }
  for (uint32_t j = sp.begin, rows; j < sp.end; j += rows) {
    const Tile t = tileAt(sp, j);
    rows = t.rows;
    const TileSource from = source(sp, t, m_tail);
    const uint8_t* keyBytes = m_cache.row(m_layer, KvPart::kKey, sp.h, t.pos).data();
    const bool int8 = m_int8Keys && from != TileSource::kTail;
    if (from == TileSource::kTail) {
      m_tailRows.decode(m_cache.tailRow(m_layer, KvPart::kKey, sp.h, t.pos).data(), rows,
                        s.k.data(), p.stride);
    } else if (!int8) {
      m_keyRows.decode(keyBytes, rows, s.k.data(), p.stride);
    }
    for (uint32_t k = 0; k < sp.groups; ++k) {
      float* tile = scoresOf(sp, s, k) + size_t{j - sp.begin} * kLanes;
      if (int8) {
        tile::scoresQ8(&s.qInt8[size_t{k} * kLanes * m_keyBlocks], sp.nq[k], keyBytes,
                       m_keys.rowBytes(), rows, p.d, tile, portable);
      } else {
        tile::scores(&s.q[size_t{k} * kLanes * p.stride], sp.nq[k], s.k.data(), rows, p.stride,
                     tile, portable);
      }
    }
    if (from == TileSource::kBand) {
      // The lanes past their tail bound take the scores of the tail's rows.
      m_tailRows.decode(m_cache.tailRow(m_layer, KvPart::kKey, sp.h, t.pos).data(), rows,
                        s.k.data(), p.stride);
      for (uint32_t k = 0; k < sp.groups; ++k) {
        float* tile = scoresOf(sp, s, k) + size_t{j - sp.begin} * kLanes;
        float* band = &s.band[size_t{k} * kRows * kLanes];
        tile::scores(&s.q[size_t{k} * kLanes * p.stride], sp.nq[k], s.k.data(), rows, p.stride,
                     band, portable);
        for (uint32_t r = 0; r < rows; ++r)
          for (uint32_t i = 0; i < sp.nq[k]; ++i)
            if (t.pos + r >= sp.tail[k][i]) tile[r * kLanes + i] = band[r * kLanes + i];
      }
    }
    for (uint32_t k = 0; k < sp.groups; ++k) {
      float* tile = scoresOf(sp, s, k) + size_t{j - sp.begin} * kLanes;
      tile::maskMax(tile, rows, t.pos, sp.from[k], sp.last[k], max[k], portable);
    }
  }
  for (uint32_t k = 0; k < sp.groups; ++k)
    tile::expSum(scoresOf(sp, s, k), sp.end - sp.begin, max[k], sum[k], portable);
}

// Pass 2: weights = exps * factor (rounded to f16 like the reference where
// it rounds), summed over the V rows into s.acc ([group][lane][stride]).
// With sparse V, weights below the threshold become 0 and the rows some
// weight remains for are moved to the front of the tile (weights of every
// group alike); only they are decoded and summed.
void AttentionRun::valuePass(const Span& sp, Scratch& s, const float (*factor)[kLanes]) const {
  const Plan& p = m_p;
  const bool portable = m_options.portable;
  const float sparseV = m_options.sparseV;
  std::fill(s.acc.begin(), s.acc.end(), 0.0f);
  for (uint32_t j = sp.begin, rows; j < sp.end; j += rows) {
    const Tile t = tileAt(sp, j);
    rows = t.rows;
    float* tiles[kMaxGroupsPerJob];
    for (uint32_t k = 0; k < sp.groups; ++k) {
      tiles[k] = scoresOf(sp, s, k) + size_t{j - sp.begin} * kLanes;
      tile::scale(tiles[k], rows, factor[k], m_roundToF16, portable);
    }
    const TileSource from = source(sp, t, m_tail);
    if (from == TileSource::kBand) {
      bandValues(sp, s, t, tiles);
      continue;
    }
    const bool tail = from == TileSource::kTail;
    const KvRowDecoder& decoder = tail ? m_tailRows : m_valueRows;
    const uint8_t* valueBytes = tail ? m_cache.tailRow(m_layer, KvPart::kValue, sp.h, t.pos).data()
                                     : m_cache.row(m_layer, KvPart::kValue, sp.h, t.pos).data();
    const size_t rowBytes = tail ? m_cache.tailScheme(m_layer).rowBytes() : m_values.rowBytes();
    uint32_t kept = rows;
    if (sparseV > 0.0f) {
      // A weight below the threshold is dropped for its query; a row no
      // query keeps is skipped.
      const auto keeps = [&](uint32_t r) {
        bool any = false;
        for (uint32_t k = 0; k < sp.groups; ++k) {
          for (uint32_t i = 0; i < sp.nq[k]; ++i) {
            float& w = tiles[k][r * kLanes + i];
            if (w < sparseV) w = 0.0f;
            any |= w != 0.0f;
          }
        }
        return any;
      };
      kept = 0;
      for (uint32_t r = 0; r < rows; ++r) {
        if (!keeps(r)) continue;
        // Rows kept in a row decode together.
        const uint32_t first = r;
        while (r + 1 < rows && keeps(r + 1)) ++r;
        const uint32_t count = r + 1 - first;
        decoder.decode(valueBytes + first * rowBytes, count, &s.v[size_t{kept} * p.stride],
                       p.stride);
        for (uint32_t k = 0; k < sp.groups; ++k)
          std::copy_n(&tiles[k][first * kLanes], count * kLanes, &tiles[k][kept * kLanes]);
        kept += count;
      }
      if (kept == 0) continue;
    } else {
      decoder.decode(valueBytes, rows, s.v.data(), p.stride);
    }
    for (uint32_t k = 0; k < sp.groups; ++k)
      tile::accumulate(tiles[k], sp.nq[k], s.v.data(), kept, p.stride,
                       &s.acc[size_t{k} * kLanes * p.stride], portable);
  }
}

// A band tile of V: each lane's weights split at its tail bound, the rows
// before it summed from their codes and the rest from the tail (sparse V
// drops the small weights but decodes every row: a band is a few rows of a
// prefill step).
void AttentionRun::bandValues(const Span& sp, Scratch& s, const Tile& t,
                              float* const* tiles) const {
  const Plan& p = m_p;
  const bool portable = m_options.portable;
  for (uint32_t k = 0; k < sp.groups; ++k) {
    float* band = &s.band[size_t{k} * kRows * kLanes];
    for (uint32_t r = 0; r < t.rows; ++r) {
      for (uint32_t i = 0; i < kLanes; ++i) {
        float& w = tiles[k][r * kLanes + i];
        if (w < m_options.sparseV) w = 0.0f;
        const bool fromTail = i < sp.nq[k] && t.pos + r >= sp.tail[k][i];
        band[r * kLanes + i] = fromTail ? w : 0.0f;
        if (fromTail) w = 0.0f;
      }
    }
  }
  m_valueRows.decode(m_cache.row(m_layer, KvPart::kValue, sp.h, t.pos).data(), t.rows, s.v.data(),
                     p.stride);
  for (uint32_t k = 0; k < sp.groups; ++k)
    tile::accumulate(tiles[k], sp.nq[k], s.v.data(), t.rows, p.stride,
                     &s.acc[size_t{k} * kLanes * p.stride], portable);
  m_tailRows.decode(m_cache.tailRow(m_layer, KvPart::kValue, sp.h, t.pos).data(), t.rows,
                    s.v.data(), p.stride);
  for (uint32_t k = 0; k < sp.groups; ++k)
    tile::accumulate(&s.band[size_t{k} * kRows * kLanes], sp.nq[k], s.v.data(), t.rows, p.stride,
                     &s.acc[size_t{k} * kLanes * p.stride], portable);
}

// out = acc, rotated back to the model's space.
void AttentionRun::finish(uint32_t h, uint32_t v, const float* acc) const {
  float* o = m_out + vectorRow(h, v);
  if (m_values.rotated()) {
    rotateRowBack(m_values, acc, o);
  } else {
    std::copy_n(acc, m_p.d, o);
  }
}

template <typename Body>
void AttentionRun::forEachJob(const Body& body) const {
  std::atomic<uint32_t> next{0};
  m_pool.parallelFor(m_threads, [&](size_t, size_t) {
    thread_local Scratch s;
    s.size(m_p, m_p.chunks == 1 ? m_positions : 0);
    for (uint32_t job; (job = next.fetch_add(1, std::memory_order_relaxed)) < m_p.jobs();)
      body(span(job), job, s);
  });
}

void AttentionRun::runWhole() const {
  forEachJob([&](const Span& sp, uint32_t, Scratch& s) {
    alignas(32) float max[kMaxGroupsPerJob][kLanes], sum[kMaxGroupsPerJob][kLanes],
        factor[kMaxGroupsPerJob][kLanes];
    scorePass(sp, s, max, sum);
    for (uint32_t k = 0; k < sp.groups; ++k)
      for (uint32_t i = 0; i < kLanes; ++i)
        factor[k][i] = i < sp.nq[k] ? normalizer(sp.h, sp.v0[k] + i, max[k][i], sum[k][i]) : 0.0f;
    valuePass(sp, s, factor);
    for (uint32_t k = 0; k < sp.groups; ++k)
      for (uint32_t i = 0; i < sp.nq[k]; ++i)
        finish(sp.h, sp.v0[k] + i, &s.acc[(size_t{k} * kLanes + i) * m_p.stride]);
  });
}

// One group per job; partial results are indexed by job.
void AttentionRun::runChunked() const {
  const Plan& p = m_p;
  forEachJob([&](const Span& sp, uint32_t job, Scratch& s) {
    scorePass(sp, s, reinterpret_cast<float(*)[kLanes]>(&m_partMax[size_t{job} * kLanes]),
              reinterpret_cast<float(*)[kLanes]>(&m_partSum[size_t{job} * kLanes]));
  });
  // Pass 2 rescales each chunk's exps to the group's max and total.
  forEachJob([&](const Span& sp, uint32_t job, Scratch& s) {
    alignas(32) float factor[1][kLanes];
    const size_t first = size_t{job / p.chunks} * p.chunks * kLanes;
    for (uint32_t i = 0; i < kLanes; ++i) {
      float max = -INFINITY, sum = 0.0f;
      for (uint32_t c = 0; c < p.chunks; ++c)
        max = std::max(max, m_partMax[first + c * kLanes + i]);
      for (uint32_t c = 0; c < p.chunks; ++c) {
        const float m = m_partMax[first + c * kLanes + i];
        if (m != -INFINITY) sum += m_partSum[first + c * kLanes + i] * std::exp(m - max);
      }
      const float mine = m_partMax[size_t{job} * kLanes + i];
      factor[0][i] = mine == -INFINITY || sum == 0.0f || i >= sp.nq[0]
                         ? 0.0f
                         : std::exp(mine - max) * normalizer(sp.h, sp.v0[0] + i, max, sum);
    }
    valuePass(sp, s, factor);
    std::copy_n(s.acc.begin(), kLanes * p.stride, &m_partAcc[size_t{job} * kLanes * p.stride]);
  });
  // A group's output is the plain sum of its chunks' weighted V sums.
  std::vector<float> acc(p.stride);
  for (uint32_t rest = 0; rest < p.nHeadKv * p.groups; ++rest) {
    const Span sp = span(rest * p.chunks);
    for (uint32_t i = 0; i < sp.nq[0]; ++i) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (uint32_t c = 0; c < p.chunks; ++c) {
        const float* part = &m_partAcc[((size_t{rest} * p.chunks + c) * kLanes + i) * p.stride];
        for (uint32_t k = 0; k < p.d; ++k) acc[k] += part[k];
      }
      finish(sp.h, sp.v0[0] + i, acc.data());
    }
  }
}

void AttentionRun::run() {
  if (m_p.chunks == 1) {
    runWhole();
  } else {
    runChunked();
  }
}

}  // namespace

void attention(const kv::KvCache& cache, uint32_t layer, const float* q, uint32_t n, uint32_t pos0,
               uint32_t nHead, ThreadPool& pool, float* out, const AttentionOptions& options) {
  if (n == 0) return;
  AttentionRun(cache, layer, q, n, pos0, nHead, pool, out, options).run();
}

}  // namespace kvscope::cpu
