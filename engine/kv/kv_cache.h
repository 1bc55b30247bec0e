#pragma once
// The KV cache in host memory, paged: rows are appended token by token into
// pages of `rowsPerPage` rows; a page, once allocated, never moves, so growing
// never copies. A page holds, for its rows, every (layer, K|V, KV head)
// stream:  page[layer][part][head][rowsPerPage][rowBytes(layer, part)].
// Each layer's K and V may use a different scheme (and so row size).
// trim(n) keeps the first n rows and frees whole pages past them.
//
// The indexer's sidecar (kv/kv_index.h), when enabled, is kept beside the
// pages: every K row written is folded into it, trim() rebuilds its last
// partial page, and its bytes are a category of their own (KvBytes::sidecar,
// counted with K). It is not saved: enableIndex() rebuilds it from the rows.
//
// Seeds: create() builds the scheme of stream (layer, part) with
// streamSeed(cacheSeed, layer, part); the cache seed is recorded and saved.
//
// Saved form (little-endian; save/load), independent of rowsPerPage:
//   "KVSC" u32 version(1) | u32 nLayer, nHeadKv, headDim, rowsPerPage |
//   u64 cacheSeed | per layer, K then V: u8 name length, name, u64 seed |
//   u32 rows | per layer, part, head: rows x rowBytes bytes.

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "kv/kv_index.h"
#include "kv/kv_scheme.h"

namespace kvscope::kv {

enum class KvPart { kKey = 0, kValue = 1 };

struct KvGeometry {
  uint32_t nLayer = 0;
  uint32_t nHeadKv = 0;
  uint32_t headDim = 0;
  uint32_t rowsPerPage = 256;
};

// The scheme names of one layer.
struct LayerSchemes {
  std::string key = "f16";
  std::string value = "f16";
  bool operator==(const LayerSchemes&) const = default;
};

// Bytes the cache holds, by what they are for.
struct KvBytes {
  uint64_t codes = 0;
  uint64_t scales = 0;
  uint64_t sidecar = 0;  // the indexer's page bounds (K only)
  uint64_t padding = 0;  // layout padding inside rows
  uint64_t unused = 0;   // allocated page rows not yet filled
  // What the cached rows take: everything but `unused`.
  uint64_t used() const { return codes + scales + sidecar + padding; }
  uint64_t total() const { return used() + unused; }
};

class KvCache {
 public:
  // One LayerSchemes per layer; every scheme is built for geometry.headDim
  // with its stream seed. Errors: bad geometry, unknown scheme, bad dim.
  static Expected<std::unique_ptr<KvCache>> create(KvGeometry geometry,
                                                   std::span<const LayerSchemes> layers,
                                                   uint64_t cacheSeed = kDefaultCacheSeed);
  // From schemes built by the caller (each for geometry.headDim); cacheSeed
  // is only recorded.
  KvCache(KvGeometry geometry, std::vector<std::shared_ptr<const KvScheme>> keySchemes,
          std::vector<std::shared_ptr<const KvScheme>> valueSchemes,
          uint64_t cacheSeed = kDefaultCacheSeed);
  // The same scheme for every layer.
  KvCache(KvGeometry geometry, std::shared_ptr<const KvScheme> key,
          std::shared_ptr<const KvScheme> value);

  const KvGeometry& geometry() const { return m_geometry; }
  uint64_t cacheSeed() const { return m_cacheSeed; }
  const KvScheme& scheme(uint32_t layer, KvPart part) const;
  uint32_t rowBytes(uint32_t layer, KvPart part) const { return scheme(layer, part).rowBytes(); }
  std::vector<LayerSchemes> layerSchemes() const;

  uint32_t rows() const { return m_rows; }
  uint32_t capacity() const {
    return static_cast<uint32_t>(m_pages.size()) * m_geometry.rowsPerPage;
  }

  // Makes room for rows [rows(), rows() + n) and counts them as present.
  // Allocation failure is kOutOfMemory and leaves the cache unchanged.
  Status append(uint32_t n);
  // Keeps rows [0, n); frees pages wholly past them. n > rows() is an error.
  Status trim(uint32_t n);
  // Appends every row of `source` (same nLayer, nHeadKv, headDim), decoded
  // through its schemes and encoded through this cache's.
  Status appendRecoded(const KvCache& source);

  // Bytes of row `index` (< rows()) of one stream.
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

  // Writes / reads the saved form above. load() validates everything it
  // reads: a truncated or corrupt stream is kBadFile, never a crash.
  Status save(std::ostream& out) const;
  static Expected<std::unique_ptr<KvCache>> load(std::istream& in);

 private:
  size_t streamOffset(uint32_t layer, KvPart part, uint32_t head) const;
  // Folds stored K row `index` of (layer, head) into the sidecar.
  void indexRow(uint32_t layer, uint32_t head, uint32_t index);

  KvGeometry m_geometry;
  uint64_t m_cacheSeed = kDefaultCacheSeed;
  std::vector<std::shared_ptr<const KvScheme>> m_schemes[2];  // [part][layer]
  std::vector<size_t> m_partOffset;  // [layer * 2 + part]: offset of that block in a page
  size_t m_pageBytes = 0;
  std::vector<std::unique_ptr<uint8_t[]>> m_pages;
  uint32_t m_rows = 0;
  std::unique_ptr<KvIndex> m_index;
  std::vector<float> m_indexRow;  // [headDim]: a K row decoded for the sidecar
};

}  // namespace kvscope::kv
