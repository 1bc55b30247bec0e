#include "kv/kv_cache.h"

#include <algorithm>
#include <cassert>
#include <new>

#include "kv/rotation.h"

namespace kvscope::kv {

KvCache::KvCache(KvLayout layout) : m_layout(std::move(layout)), m_held(m_layout.geometry()) {}

Expected<std::unique_ptr<KvCache>> KvCache::create(KvGeometry geometry,
                                                   std::span<const LayerSchemes> layers,
                                                   uint64_t cacheSeed) {
  KVS_ASSIGN_OR_RETURN(KvLayout layout, KvLayout::create(geometry, layers, cacheSeed));
  return std::make_unique<KvCache>(std::move(layout));
}

Status KvCache::append(uint32_t n) {
  KVS_TRY(m_held.checkStep(n));
  return grow(rows() + n);
}

Status KvCache::grow(uint32_t rows) {
  const size_t before = m_pages.size();
  const auto outOfMemory = [&](size_t bytes) {
    m_pages.resize(before);
    return makeError(ErrorCode::kOutOfMemory,
                     "cannot grow the KV cache to {} tokens ({:.1f} MiB more needed)", rows,
                     static_cast<double>(bytes) / (1 << 20));
  };
  while (capacity() < rows) {
    auto* page = new (std::nothrow) uint8_t[m_layout.pageBytes()];
    if (!page) return outOfMemory(m_layout.pageBytes());
    m_pages.emplace_back(page);
  }
  if (!m_ring && m_layout.ringPageBytes() > 0) {
    m_ring.reset(new (std::nothrow) uint8_t[m_layout.ringPageBytes()]);
    if (!m_ring) return outOfMemory(m_layout.ringPageBytes());
  }
  if (!m_tail && m_layout.tailBytes() > 0) {
    m_tail.reset(new (std::nothrow) uint8_t[m_layout.tailBytes()]);
    if (!m_tail) return outOfMemory(m_layout.tailBytes());
  }
  m_held.grow(rows);
  return okStatus();
}

Status KvCache::trim(uint32_t n) {
  KVS_TRY(m_held.trim(n));
  if (n == 0) {
    m_ring.reset();
    m_tail.reset();
  }
  if (m_index) {
    // The page left partial is rebuilt from its rows, as appending made it.
    m_index->truncate(n);
    for (uint32_t l = 0; l < geometry().nLayer(); ++l) {
      if (m_layout.isWindow(l)) continue;
      for (uint32_t h = 0; h < geometry().nHeadKv(l); ++h)
        for (uint32_t r = m_index->rows(l, h); r < n; ++r) indexRow(l, h, r);
    }
  }
  m_pages.resize(m_layout.pagesFor(n));
  return okStatus();
}

Status KvCache::appendRecoded(const KvCache& source) {
  const KvGeometry& g = source.geometry();
  if (!g.sameStreams(geometry()) || rows() != 0) {
    return makeError(ErrorCode::kInternal,
                     "a KV cache is recoded only into an empty one of the same geometry");
  }
  KVS_TRY(grow(source.rows()));
  m_held.holdNoEarlierThan(source.m_held);
  // The tail is written from the source's rows: as good as the full-precision
  // rows where the source holds them at f16 (a two-phase cache's first
  // compression), else empty.
  bool exact = true;
  for (uint32_t l = 0; l < g.nLayer(); ++l)
    for (KvPart p : {KvPart::kKey, KvPart::kValue})
      exact &= !hasTail(l) || source.scheme(l, p).rowCode() == RowCode::kF16;
  m_held.tailRecoded(exact);
  std::vector<float> values;
  for (uint32_t l = 0; l < g.nLayer(); ++l) {
    values.resize(g.headDim(l));
    for (KvPart p : {KvPart::kKey, KvPart::kValue}) {
      for (uint32_t h = 0; h < g.nHeadKv(l); ++h) {
        for (uint32_t r = firstRow(l); r < rows(); ++r) {
          source.read(l, p, h, r, values);
          write(l, p, h, r, values);
        }
      }
    }
  }
  return okStatus();
}

std::span<uint8_t> KvCache::row(uint32_t layer, KvPart part, uint32_t head, uint32_t index) {
  assert(layer < geometry().nLayer() && head < geometry().nHeadKv(layer) && index < rows() &&
         index >= firstRow(layer));
  uint8_t* page =
      m_layout.inRing(layer) ? m_ring.get() : m_pages[index / geometry().rowsPerPage].get();
  return {page + m_layout.rowOffset(layer, part, head, index), rowBytes(layer, part)};
}

std::span<const uint8_t> KvCache::row(uint32_t layer, KvPart part, uint32_t head,
                                      uint32_t index) const {
  return const_cast<KvCache*>(this)->row(layer, part, head, index);
}

void KvCache::write(uint32_t layer, KvPart part, uint32_t head, uint32_t index,
                    std::span<const float> values) {
  assert(values.size() == geometry().headDim(layer));
  const KvScheme& s = scheme(layer, part);
  s.encode(values, row(layer, part, head, index));
  if (hasTail(layer)) {
    std::span<const float> rotated = values;
    if (s.rotated()) {
      m_tailRow.resize(values.size());
      if (const auto signs = s.hadamardSigns(); !signs.empty())
        hadamardRotate(signs, values.data(), m_tailRow.data());
      else
        rotateVector(s.rotation(), values, m_tailRow);
      rotated = m_tailRow;
    }
    const KvScheme& f16 = tailScheme(layer);
    f16.encode(rotated, {tailSlot(layer, part, head, index % tailSlots()), f16.rowBytes()});
  }
  if (m_index && part == KvPart::kKey && !m_layout.isWindow(layer)) indexRow(layer, head, index);
}

void KvCache::indexRow(uint32_t layer, uint32_t head, uint32_t index) {
  m_indexRow.resize(geometry().headDim(layer));
  readRotated(layer, KvPart::kKey, head, index, m_indexRow);
  m_index->add(layer, head, index, m_indexRow.data());
}

void KvCache::enableIndex(const IndexerOptions& options) {
  if (!options.enabled()) {
    m_index.reset();
    return;
  }
  if (m_index && m_index->pageRows() == options.pageRows && m_index->score() == options.pageScore)
    return;
  m_index = std::make_unique<KvIndex>(geometry().layers, options.pageRows, options.pageScore);
  rebuildIndex();
}

void KvCache::rebuildIndex() {
  if (!m_index) return;
  m_index = std::make_unique<KvIndex>(geometry().layers, m_index->pageRows(), m_index->score());
  for (uint32_t l = 0; l < geometry().nLayer(); ++l) {
    if (m_layout.isWindow(l)) continue;
    for (uint32_t h = 0; h < geometry().nHeadKv(l); ++h)
      for (uint32_t r = 0; r < rows(); ++r) indexRow(l, h, r);
  }
}

// One span per (layer, part, head, page): a head's rows are contiguous
// within a page (a ring's until it wraps), so this is the canonical order in
// as few pieces as the pages allow. pageOf(layer, row): the page holding it.
template <typename Span, typename PageOf, typename F>
static Status forEachRun(const KvLayout& layout, PageOf&& pageOf, uint32_t rows, F&& f) {
  const KvGeometry& g = layout.geometry();
  for (uint32_t l = 0; l < g.nLayer(); ++l) {
    const uint32_t pageRows = layout.pageRows(l);
    for (KvPart p : {KvPart::kKey, KvPart::kValue}) {
      for (uint32_t h = 0; h < g.nHeadKv(l); ++h) {
        for (uint32_t first = rows - layout.keptRows(l, rows), count; first < rows;
             first += count) {
          count = std::min(pageRows - first % pageRows, rows - first);
          KVS_TRY(f(Span(pageOf(l, first) + layout.rowOffset(l, p, h, first),
                         size_t{count} * layout.rowBytes(l, p))));
        }
      }
    }
  }
  return okStatus();
}

uint8_t* KvCache::pageOf(uint32_t layer, uint32_t row) const {
  return m_layout.inRing(layer) ? m_ring.get() : m_pages[row / geometry().rowsPerPage].get();
}

Status KvCache::importRows(uint32_t rows, const std::function<Status(std::span<uint8_t>)>& read) {
  if (this->rows() != 0)
    return makeError(ErrorCode::kInternal, "rows can only be imported into an empty KV cache");
  KVS_TRY(grow(rows));
  m_held.restored(rows);  // the window layers' last rows, no tail until importTail
  const auto page = [this](uint32_t l, uint32_t r) { return pageOf(l, r); };
  const Status status = forEachRun<std::span<uint8_t>>(m_layout, page, rows, read);
  if (!status.ok()) {
    (void)trim(0);
    return status;
  }
  rebuildIndex();
  return okStatus();
}

Status KvCache::exportRows(const std::function<Status(std::span<const uint8_t>)>& write) const {
  const auto page = [this](uint32_t l, uint32_t r) -> const uint8_t* { return pageOf(l, r); };
  return forEachRun<std::span<const uint8_t>>(m_layout, page, rows(), write);
}

void KvCache::read(uint32_t layer, KvPart part, uint32_t head, uint32_t index,
                   std::span<float> values) const {
  assert(values.size() == geometry().headDim(layer));
  scheme(layer, part).decode(row(layer, part, head, index), values);
}

void KvCache::readRotated(uint32_t layer, KvPart part, uint32_t head, uint32_t index,
                          std::span<float> values) const {
  assert(values.size() == geometry().headDim(layer));
  scheme(layer, part).decodeRotated(row(layer, part, head, index), values);
}

KvBytes KvCache::layerBytes(uint32_t layer, KvPart part) const {
  const uint32_t capacity =
      m_layout.inRing(layer) ? (m_ring ? geometry().ringRows : 0) : this->capacity();
  KvBytes b = m_layout.bytes(layer, part, rows() - firstRow(layer), capacity);
  if (m_index && part == KvPart::kKey) b.sidecar = m_index->layerBytes(layer);
  if (m_tail) m_layout.addTailBytes(b, layer, std::min(tailHeld(), rows() - firstRow(layer)));
  return b;
}

uint64_t KvCache::allocatedBytes() const {
  uint64_t sidecar = 0;
  for (uint32_t l = 0; m_index && l < geometry().nLayer(); ++l) sidecar += m_index->layerBytes(l);
  return uint64_t{m_pages.size()} * m_layout.pageBytes() + (m_ring ? m_layout.ringPageBytes() : 0) +
         sidecar + (m_tail ? m_layout.tailBytes() : 0);
}

void KvCache::readAttended(uint32_t layer, KvPart part, uint32_t head, uint32_t index,
                           uint32_t position, std::span<float> values) const {
  if (hasTail(layer) && index >= tailStart(layer, position)) {
    tailScheme(layer).decode(tailRow(layer, part, head, index), values);
  } else {
    readRotated(layer, part, head, index, values);
  }
}

std::span<const uint8_t> KvCache::tailRow(uint32_t layer, KvPart part, uint32_t head,
                                          uint32_t index) const {
  assert(hasTail(layer) && index >= m_held.tailFirst() && index < rows());
  return {tailSlot(layer, part, head, index % tailSlots()), tailScheme(layer).rowBytes()};
}

Status KvCache::exportTail(const std::function<Status(std::span<const uint8_t>)>& write) const {
  return m_layout.forEachTailRun(rows(), tailHeld(), [&](size_t offset, size_t bytes) {
    return write({m_tail.get() + offset, bytes});
  });
}

Status KvCache::importTail(uint32_t held, const std::function<Status(std::span<uint8_t>)>& read) {
  if (held == 0) return okStatus();
  KVS_TRY(m_held.checkTailImport(held));
  if (!m_tail)
    return makeError(ErrorCode::kInvalidArgument, "this KV cache keeps no precision tail");
  KVS_TRY(m_layout.forEachTailRun(rows(), held, [&](size_t offset, size_t bytes) {
    return read({m_tail.get() + offset, bytes});
  }));
  m_held.tailRestored(held);
  return okStatus();
}

KvBytes KvCache::bytes() const {
  KvBytes total;
  for (uint32_t l = 0; l < geometry().nLayer(); ++l)
    for (KvPart p : {KvPart::kKey, KvPart::kValue}) total += layerBytes(l, p);
  return total;
}

uint64_t KvCache::f16EquivalentBytes() const {
  uint64_t values = 0;  // Σ layers of the values each holds, in K and in V
  for (uint32_t l = 0; l < geometry().nLayer(); ++l)
    values += uint64_t{rows() - firstRow(l)} * geometry().nHeadKv(l) * geometry().headDim(l) * 2;
  return values * 2;
}

}  // namespace kvscope::kv
