#pragma once
// KvLayout: the one description of a paged KV cache that both backends use
// (kv::KvCache on the host, the Vulkan backend's device pages).
//
// A page holds rowsPerPage (R) rows of every (layer, K|V, KV head) stream:
//   page[layer][part][head][R][rowBytes(layer, part)]
// Each stream's scheme is built for its layer's head dim with
// streamSeed(cacheSeed, layer, part), here and nowhere else, so two layouts
// from the same schemes and seed encode identically. R is a parameter of the
// backend (the CPU keeps 256; the Vulkan backend grows it with the context,
// gpu::AttentionKernels::kMaxPages), and nothing outside the pages depends on
// it: the canonical row order ([layer][part][head][row 0..n)) of a saved
// cache ignores it.
//
// Sliding-window layers (a model's local attention, KvGeometry::window) need
// only their last window - 1 rows for the next token. With ringRows > 0 they
// live apart from the growing pages, in one ring page of ringRows rows that
// never grows:
//   ringPage[window layer][part][head][ringRows][rowBytes(layer, part)]
// where cache row r sits at slot r % ringRows, so writing row r overwrites row
// r - ringRows. A backend sizes the ring to window - 1 + the most rows one
// forward step appends (every row a query of that step sees is still there).
// The canonical order keeps, for a window layer, only its last keptRows()
// rows, so a saved cache does not depend on the ring's size either.
//
// The precision tail (KvGeometry::tailRows = N > 0) is a third ring: a layer
// whose K or V scheme is not f16 keeps the last rows of both, at f16 in their
// schemes' rotated space, in
//   tail[layer with a tail][part][head][tailRingRows][tailRowBytes(layer)]
// with cache row r at slot r % tailRingRows. Both parts even where one is
// f16, so that a layer's tail reads like one more page of f16 rows (the
// Vulkan kernels attend it as one, gpu/attention_kernels.h). Which rows the
// ring holds is CachedRows's bookkeeping.
//
// Accounting lives here too: bytes(rows, capacity) splits the rows' bytes by
// what they are (codes, scales, padding, unused page rows) from the schemes'
// row layouts, tailStreamBytes the tail's; the indexer's sidecar is counted
// by its owner (KvIndex).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "kv/kv_scheme.h"

namespace kvscope::kv {

enum class KvPart { kKey = 0, kValue = 1 };

// One layer's streams: nHeadKv KV heads of headDim values, in K and in V.
struct KvLayerShape {
  uint32_t nHeadKv = 0;
  uint32_t headDim = 0;
  bool operator==(const KvLayerShape&) const = default;
};

struct KvGeometry {
  // [nLayer]: most models give every layer the same shape; Gemma 4 gives its
  // global layers wider heads and fewer of them than its window layers.
  std::vector<KvLayerShape> layers;
  uint32_t rowsPerPage = 256;
  // Sliding-window layers: a query at position p sees rows (p - window, p].
  uint32_t window = 0;             // 0: every layer global
  std::vector<bool> windowLayers;  // [nLayer] when window > 0
  uint32_t ringRows = 0;           // rows of the window layers' ring; 0: no ring
  // The precision tail (KvLayout::hasTail): a query reads its last tailRows
  // rows at f16; they live in a ring of tailRingRows >= tailRows (a step of n
  // rows needs tailRows + n - 1). 0: no tail.
  uint32_t tailRows = 0;
  uint32_t tailRingRows = 0;

  // nLayer layers of nHeadKv heads of headDim values.
  static KvGeometry uniform(uint32_t nLayer, uint32_t nHeadKv, uint32_t headDim,
                            uint32_t rowsPerPage = 256);
  uint32_t nLayer() const { return static_cast<uint32_t>(layers.size()); }
  uint32_t nHeadKv(uint32_t layer) const { return layers[layer].nHeadKv; }
  uint32_t headDim(uint32_t layer) const { return layers[layer].headDim; }
  bool isWindow(uint32_t layer) const {
    return window > 0 && layer < windowLayers.size() && windowLayers[layer];
  }
  // Whether two geometries hold the same streams (layers and windows; the
  // page and ring sizes and the tail aside).
  bool sameStreams(const KvGeometry& other) const {
    return layers == other.layers && window == other.window && windowLayers == other.windowLayers;
  }
};

// The scheme names of one layer.
struct LayerSchemes {
  std::string key = "f16";
  std::string value = "f16";
  bool operator==(const LayerSchemes&) const = default;
};

// Bytes a cache holds, by what they are for.
struct KvBytes {
  uint64_t codes = 0;
  uint64_t scales = 0;
  uint64_t sidecar = 0;  // the indexer's page bounds (K only)
  uint64_t tail = 0;     // the precision tail's f16 copies of the last rows
  uint64_t padding = 0;  // layout padding inside rows
  uint64_t unused = 0;   // allocated page rows not yet filled
  // What the cached rows take: everything but `unused`.
  uint64_t used() const { return codes + scales + sidecar + tail + padding; }
  uint64_t total() const { return used() + unused; }
  KvBytes& operator+=(const KvBytes& o);
};

class KvLayout {
 public:
  // One LayerSchemes per layer. Errors: bad geometry, unknown scheme, a
  // scheme that cannot take its layer's head dim.
  static Expected<KvLayout> create(KvGeometry geometry, std::span<const LayerSchemes> layers,
                                   uint64_t cacheSeed = kDefaultCacheSeed);

  const KvGeometry& geometry() const { return m_geometry; }
  uint64_t cacheSeed() const { return m_cacheSeed; }
  const KvScheme& scheme(uint32_t layer, KvPart part) const { return *stream(layer, part).scheme; }
  uint32_t rowBytes(uint32_t layer, KvPart part) const { return stream(layer, part).rowBytes; }
  std::vector<LayerSchemes> layerSchemes() const;

  // Whether `layer` is a sliding-window layer, and whether it is kept in the ring.
  bool isWindow(uint32_t layer) const { return m_geometry.isWindow(layer); }
  bool inRing(uint32_t layer) const { return m_geometry.ringRows > 0 && isWindow(layer); }
  // Rows of the page that holds `layer`: ringRows in the ring, else R.
  uint32_t pageRows(uint32_t layer) const {
    return inRing(layer) ? m_geometry.ringRows : m_geometry.rowsPerPage;
  }

  // Bytes of one growing page and of the ring page (0 without a ring), and
  // where the (layer, part) block [nHeadKv][pageRows(layer)][rowBytes] starts
  // in the page that holds it.
  size_t pageBytes() const { return m_pageBytes; }
  size_t ringPageBytes() const { return m_ringPageBytes; }
  size_t partOffset(uint32_t layer, KvPart part) const { return stream(layer, part).partOffset; }
  size_t partBytes(uint32_t layer, KvPart part) const {
    return size_t{m_geometry.nHeadKv(layer)} * pageRows(layer) * rowBytes(layer, part);
  }
  // Byte offset of cache row `row` of (layer, part, head) inside the page
  // that holds it: page row / R, or the ring.
  size_t rowOffset(uint32_t layer, KvPart part, uint32_t head, uint32_t row) const {
    const uint32_t rows = pageRows(layer);
    return partOffset(layer, part) + (size_t{head} * rows + row % rows) * rowBytes(layer, part);
  }
  // Rows of `layer` the next token needs of a cache of `rows` rows: all of
  // them, or a window layer's last window - 1. The canonical order holds these.
  uint32_t keptRows(uint32_t layer, uint32_t rows) const {
    return isWindow(layer) ? std::min(rows, m_geometry.window - 1) : rows;
  }
  // Bytes of a cache of `rows` rows in the canonical order.
  uint64_t canonicalBytes(uint32_t rows) const;
  // Growing pages that hold `rows` rows.
  size_t pagesFor(uint64_t rows) const {
    return static_cast<size_t>((rows + m_geometry.rowsPerPage - 1) / m_geometry.rowsPerPage);
  }
  // Bytes one more token adds: Σ layers, parts of nHeadKv(layer) x rowBytes over
  // the layers that keep every row (a ring does not grow).
  uint64_t tokenBytes() const;

  // The accounting of `rows` rows of one stream in pages holding `capacity`
  // rows (sidecar left 0).
  KvBytes bytes(uint32_t layer, KvPart part, uint64_t rows, uint64_t capacity) const;

  // The precision tail (see above). hasTail: whether `layer` keeps one.
  // tailScheme: f16 of the layer's head dim, its rows' scheme. tailOffset:
  // where slot `slot` of (layer, part, head) starts in the tail's buffer of
  // tailBytes() bytes (0 without a tail), for a layer that keeps one.
  // tailStreamBytes: `rows` rows of one part of the layer, all KV heads (0
  // for a layer without a tail).
  bool hasTail(uint32_t layer) const { return m_tailStart[layer] != kNoTail; }
  const KvScheme& tailScheme(uint32_t layer) const { return *m_tailScheme[layer]; }
  size_t tailOffset(uint32_t layer, KvPart part, uint32_t head, uint32_t slot) const;
  size_t tailBytes() const { return m_tailBytes; }
  // The tail's rows where some layer keeps one, else 0.
  uint32_t keptTailRows() const { return m_tailBytes > 0 ? m_geometry.tailRows : 0; }
  uint64_t tailStreamBytes(uint32_t layer, uint64_t rows) const;
  // A (layer, part) stream's accounting of an allocated tail holding `held`
  // rows: KvBytes::tail, and the rest of its ring as unused.
  void addTailBytes(KvBytes& bytes, uint32_t layer, uint32_t held) const;
  // A saved tail: per layer that keeps one (window layers included), part
  // and KV head, the last min(held, keptRows(layer, rows)) rows of a cache
  // of `rows` rows back to back, tailScheme(layer).rowBytes() each;
  // savedTailBytes is its size. forEachTailRun calls f(offset, bytes) over
  // the runs of the tail's buffer that hold them, in that order (a stream's
  // rows are one run, or two where they wrap around the ring); f's error
  // stops it.
  uint64_t savedTailBytes(uint32_t rows, uint32_t held) const;
  template <typename F>
  Status forEachTailRun(uint32_t rows, uint32_t held, F&& f) const {
    const uint32_t ring = m_geometry.tailRingRows;
    for (uint32_t l = 0; l < m_geometry.nLayer(); ++l) {
      if (!hasTail(l)) continue;
      const uint32_t n = std::min(held, keptRows(l, rows));
      const size_t rowBytes = tailScheme(l).rowBytes();
      for (KvPart p : {KvPart::kKey, KvPart::kValue}) {
        for (uint32_t h = 0; h < m_geometry.nHeadKv(l); ++h) {
          for (uint32_t r = rows - n, count; r < rows; r += count) {
            count = std::min(ring - r % ring, rows - r);
            KVS_TRY(f(tailOffset(l, p, h, r % ring), count * rowBytes));
          }
        }
      }
    }
    return okStatus();
  }

  // Whether both store the same bytes for the same rows: same geometry but
  // R and the ring's size, same cache seed and scheme names.
  bool sameStreams(const KvLayout& other) const;

 private:
  struct Stream {  // one (layer, K|V) stream
    std::shared_ptr<const KvScheme> scheme;
    uint32_t rowBytes = 0;  // scheme->rowBytes(), a multiple of 4
    size_t partOffset = 0;  // in the growing page or in the ring
  };
  const Stream& stream(uint32_t layer, KvPart part) const {
    return m_streams[size_t{layer} * 2 + static_cast<size_t>(part)];
  }

  KvGeometry m_geometry;
  uint64_t m_cacheSeed = kDefaultCacheSeed;
  std::vector<Stream> m_streams;  // [nLayer * 2]: layer, then K, V
  size_t m_pageBytes = 0;
  size_t m_ringPageBytes = 0;
  // [nLayer]: f16 of the layer's head dim, and where the layer's K block
  // starts in the tail (its V block follows; kNoTail: it keeps none).
  static constexpr size_t kNoTail = ~size_t{0};
  std::vector<std::shared_ptr<const KvScheme>> m_tailScheme;
  std::vector<size_t> m_tailStart;
  size_t m_tailBytes = 0;
};

// Which rows a cache of some geometry holds: rows [0, rows()) in its global
// layers, [windowStart(), rows()) in its window layers, and in the precision
// tail's ring [tailFirst(), rows()). The bookkeeping of the host cache and
// the Vulkan backend's pages alike.
//
// The tail: the query at position p reads rows [tailStart(p), p] from it. A
// rewind keeps what the ring still holds: after trim(n) the rows it lost to
// later ones are read through their scheme until the tail has filled again
// (tailStart never goes below tailFirst()). A restore holds no tail until
// tailRestored() says how many of the last rows came back with it.
class CachedRows {
 public:
  CachedRows() = default;
  explicit CachedRows(const KvGeometry& g)
      : m_window(g.window),
        m_ringRows(g.ringRows),
        m_tailRows(g.tailRows),
        m_tailSlots(g.tailRingRows) {}

  uint32_t rows() const { return m_rows; }
  // The first row the window layers hold.
  uint32_t windowStart() const { return m_windowStart; }
  // The smallest n > 0 trim(n) keeps (0: any n).
  uint32_t trimFloor() const { return m_windowStart == 0 ? 0 : m_windowStart + m_window - 1; }
  // Whether a step may append n rows at once (a window layer's ring holds
  // its window and them, the tail's ring the tail and them).
  Status checkStep(uint32_t n) const;
  // Rows [0, rows) present; a ring keeps the last ringRows of them.
  void grow(uint32_t rows);
  // Keeps rows [0, n): n <= rows(), and n == 0 or n >= trimFloor() (else
  // kUnsupported: the window layers no longer hold what token n would see).
  Status trim(uint32_t n);
  // `rows` restored rows, of which the window layers got their last window - 1.
  void restored(uint32_t rows);
  // After recoding from `source`, the window layers hold no earlier rows than it.
  void holdNoEarlierThan(const CachedRows& source) {
    m_windowStart = std::max(m_windowStart, source.m_windowStart);
  }

  // The oldest row the tail's ring holds (in a global layer).
  uint32_t tailFirst() const {
    return std::max(m_tailFloor, m_rows > m_tailSlots ? m_rows - m_tailSlots : 0);
  }
  // The first row the query at `position` (< rows()) reads from the tail of
  // a layer that keeps one; position + 1 without a tail.
  uint32_t tailStart(uint32_t position) const {
    if (m_tailRows == 0) return position + 1;
    return std::max(position + 1 > m_tailRows ? position + 1 - m_tailRows : 0, tailFirst());
  }
  // How many of the last rows the tail holds for the query at the last row.
  uint32_t tailHeld() const {
    if (m_tailRows == 0) return 0;
    return m_rows - std::max(tailFirst(), m_rows > m_tailRows ? m_rows - m_tailRows : 0);
  }
  // The last `held` rows are in the tail again (a restore brought them), or
  // (recoded) every row is when `exact`, else none.
  void tailRestored(uint32_t held) { m_tailFloor = m_rows - held; }
  // Whether the last `held` rows' tail may be restored now: right after a
  // restore of the rows, at most the tail's and the cache's rows.
  Status checkTailImport(uint32_t held) const;
  void tailRecoded(bool exact) { m_tailFloor = exact ? 0 : m_rows; }

 private:
  uint32_t m_window = 0, m_ringRows = 0;
  uint32_t m_tailRows = 0, m_tailSlots = 0;
  uint32_t m_rows = 0;
  uint32_t m_windowStart = 0;
  uint32_t m_tailFloor = 0;  // no row below it is in the tail
};

}  // namespace kvscope::kv
