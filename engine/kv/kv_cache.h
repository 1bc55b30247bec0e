#pragma once
// The KV cache in host memory, paged as kv/kv_layout.h describes: rows are
// appended token by token into pages of `rowsPerPage` rows; a page, once
// allocated, never moves, so growing never copies. Each layer's K and V may
// use a different scheme (and so row size). trim(n) keeps the first n rows
// and frees whole pages past them. Sliding-window layers are kept in a ring
// (kv/kv_layout.h) allocated with the first row: a window layer holds rows
// [firstRow(layer), rows()), and rewinding behind what the ring still holds
// is refused (trimFloor()).
//
// The indexer's sidecar (kv/kv_index.h), when enabled, is kept beside the
// pages: every K row written is folded into it, trim() rebuilds its last
// partial page, and its bytes are a category of their own (KvBytes::sidecar,
// counted with K). It is derived state: enableIndex() and importRows() build
// it from the rows. Window layers never go through the indexer and have no
// sidecar.
//
// The precision tail (geometry().tailRows = N > 0, the policy's tail=N; its
// layout is kv/kv_layout.h's, which rows it holds CachedRows's): the query at
// position p reads rows [tailStart(p), p] at f16, the older ones through
// their scheme. Every row written into a layer that keeps a tail is also kept
// there, in the scheme's rotated space, as f16. The codes are written as
// before, from the full-precision row, so a row that ages out of the tail is
// read from codes made of it, not of its f16 copy. A restore brings the tail
// back through importTail; a recode (appendRecoded) fills it from an f16
// source (a two-phase cache's first compression) and else starts with an
// empty one. Its bytes are KvBytes::tail (the rows the next query reads from
// it).

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "kv/kv_index.h"
#include "kv/kv_layout.h"

namespace kvscope::kv {

// The longest precision tail a policy may ask for.
inline constexpr uint32_t kMaxTailRows = 65536;

class KvCache {
 public:
  // One LayerSchemes per layer (KvLayout::create's errors).
  static Expected<std::unique_ptr<KvCache>> create(KvGeometry geometry,
                                                   std::span<const LayerSchemes> layers,
                                                   uint64_t cacheSeed = kDefaultCacheSeed);
  explicit KvCache(KvLayout layout);

  const KvLayout& layout() const { return m_layout; }
  const KvGeometry& geometry() const { return m_layout.geometry(); }
  uint64_t cacheSeed() const { return m_layout.cacheSeed(); }
  const KvScheme& scheme(uint32_t layer, KvPart part) const { return m_layout.scheme(layer, part); }
  uint32_t rowBytes(uint32_t layer, KvPart part) const { return m_layout.rowBytes(layer, part); }
  std::vector<LayerSchemes> layerSchemes() const { return m_layout.layerSchemes(); }

  uint32_t rows() const { return m_held.rows(); }
  uint32_t capacity() const {
    return static_cast<uint32_t>(m_pages.size()) * geometry().rowsPerPage;
  }

  // The first row `layer` still holds: 0, or for a window layer the oldest
  // row its ring has not overwritten (or a restore did not bring back).
  uint32_t firstRow(uint32_t layer) const {
    return m_layout.isWindow(layer) ? m_held.windowStart() : 0;
  }
  // The smallest n > 0 that trim(n) can keep: below it the window layers no
  // longer hold the rows the token at n would see (0: any n).
  uint32_t trimFloor() const { return m_held.trimFloor(); }

  // Makes room for rows [rows(), rows() + n) and counts them as present; a
  // window layer's ring takes at most ringRows of them at once. Allocation
  // failure is kOutOfMemory and leaves the cache unchanged.
  Status append(uint32_t n);
  // Keeps rows [0, n); frees pages wholly past them. n > rows(), or
  // 0 < n < trimFloor(), is an error (kUnsupported for the latter).
  Status trim(uint32_t n);
  // Fills this empty cache with the rows of `source` (the same layer shapes
  // and window), decoded through its schemes and encoded through this
  // cache's: every row it holds, so a window layer its ring.
  Status appendRecoded(const KvCache& source);

  // Bytes of row `index` (firstRow(layer) <= index < rows()) of one stream.
  std::span<uint8_t> row(uint32_t layer, KvPart part, uint32_t head, uint32_t index);
  std::span<const uint8_t> row(uint32_t layer, KvPart part, uint32_t head, uint32_t index) const;
  // Encode / decode one row through the stream's scheme.
  void write(uint32_t layer, KvPart part, uint32_t head, uint32_t index,
             std::span<const float> values);
  void read(uint32_t layer, KvPart part, uint32_t head, uint32_t index,
            std::span<float> values) const;
  // The row in its scheme's rotated space (== read for unrotated schemes).
  void readRotated(uint32_t layer, KvPart part, uint32_t head, uint32_t index,
                   std::span<float> values) const;

  // Row `index` as the query at `position` reads it, in the scheme's rotated
  // space: the tail's f16 copy for index >= tailStart(layer, position), else
  // readRotated.
  void readAttended(uint32_t layer, KvPart part, uint32_t head, uint32_t index, uint32_t position,
                    std::span<float> values) const;

  // The precision tail. hasTail: whether the layer keeps one (tailRows > 0
  // and its K or V scheme is not f16). tailStart: the first row the query at
  // `position` (< rows()) reads from the tail of a layer that keeps one
  // (position + 1 when the cache has no tail). tailRow: the f16 row
  // (tailScheme's bytes, rotated space) of an index some query reads from it.
  uint32_t tailRows() const { return geometry().tailRows; }
  bool hasTail(uint32_t layer) const { return m_layout.hasTail(layer); }
  uint32_t tailStart(uint32_t layer, uint32_t position) const {
    return std::max(m_held.tailStart(position), firstRow(layer));
  }
  const KvScheme& tailScheme(uint32_t layer) const { return m_layout.tailScheme(layer); }
  std::span<const uint8_t> tailRow(uint32_t layer, KvPart part, uint32_t head,
                                   uint32_t index) const;
  // Saving the tail. tailHeld: how many of the last rows the tail holds (0:
  // none). exportTail writes them in KvLayout::forEachTailRun's order;
  // tailBytes(rows, held) is its size. importTail fills the tail of a cache that importRows has
  // just filled (held <= tailRows() and <= rows(), else an error); read's error stops it and leaves
  // the tail empty.
  uint32_t tailHeld() const { return m_tail ? m_held.tailHeld() : 0; }
  uint64_t tailBytes(uint32_t rows, uint32_t held) const {
    return m_layout.savedTailBytes(rows, held);
  }
  Status exportTail(const std::function<Status(std::span<const uint8_t>)>& write) const;
  Status importTail(uint32_t held, const std::function<Status(std::span<uint8_t>)>& read);

  // Turns the indexer's sidecar on in the format `options` asks for (built
  // from the cached rows; kept when it already has that format) or, when the
  // indexer is off, frees it.
  void enableIndex(const IndexerOptions& options);
  // The sidecar; null when off.
  const KvIndex* index() const { return m_index.get(); }

  // Accounting of one layer or the whole cache (from the schemes' row
  // layouts); bytes().total() == allocatedBytes().
  KvBytes layerBytes(uint32_t layer, KvPart part) const;
  KvBytes bytes() const;
  uint64_t allocatedBytes() const;
  // What the same rows would take at f16, for the compression ratio.
  uint64_t f16EquivalentBytes() const;

  // Replaces an empty cache's rows with `rows` rows read in the canonical
  // order of a saved cache: per layer, K then V, per KV head, the layer's
  // last layout().keptRows(layer, rows) rows back to back (rows 0..n) but for
  // a window layer), each rowBytes(layer, part) bytes as stored. `read` fills each
  // span it is given; its error stops the import and leaves the cache empty.
  // The sidecar, when on, is rebuilt from the rows.
  Status importRows(uint32_t rows, const std::function<Status(std::span<uint8_t>)>& read);
  // The cached rows in that order, one span per (layer, part, head, page).
  Status exportRows(const std::function<Status(std::span<const uint8_t>)>& write) const;

 private:
  // Folds stored K row `index` of (layer, head) into the sidecar.
  void indexRow(uint32_t layer, uint32_t head, uint32_t index);

  // Rebuilds the sidecar (when on) from every cached row.
  void rebuildIndex();
  // Allocates what rows [0, rows) need and counts them as present (append
  // without its per-step bound: a restore or recode fills the rows at once).
  Status grow(uint32_t rows);
  // The page that holds `row` of `layer` (the ring for a window layer).
  uint8_t* pageOf(uint32_t layer, uint32_t row) const;

  KvLayout m_layout;
  std::vector<std::unique_ptr<uint8_t[]>> m_pages;
  std::unique_ptr<uint8_t[]> m_ring;  // the window layers' ring page, from the first row
  CachedRows m_held;
  std::unique_ptr<KvIndex> m_index;
  std::vector<float> m_indexRow;  // [head dim]: a K row decoded for the sidecar

  uint32_t tailSlots() const { return geometry().tailRingRows; }
  // The tail's f16 bytes of (layer, part, head) slot `slot`.
  uint8_t* tailSlot(uint32_t layer, KvPart part, uint32_t head, uint32_t slot) const {
    return m_tail.get() + m_layout.tailOffset(layer, part, head, slot);
  }
  std::unique_ptr<uint8_t[]> m_tail;  // layout().tailBytes(), from the first row
  std::vector<float> m_tailRow;       // [head dim]: a row rotated for the tail
};

}  // namespace kvscope::kv
