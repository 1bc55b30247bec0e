#pragma once
// The KV cache in host memory, paged: rows are appended token by token into
// pages of `rowsPerPage` rows; a page, once allocated, never moves, so growing
// never copies. A page holds, for its rows, every (layer, K|V, KV head)
// stream:  page[layer][part][head][rowsPerPage][rowBytes(layer, part)].
// Each layer's K and V may use a different scheme (and so row size).
// trim(n) keeps the first n rows and frees whole pages past them.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/error.h"
#include "kv/kv_scheme.h"

namespace kvscope::kv {

enum class KvPart { kKey = 0, kValue = 1 };

struct KvGeometry {
  uint32_t nLayer = 0;
  uint32_t nHeadKv = 0;
  uint32_t headDim = 0;
  uint32_t rowsPerPage = 256;
};

// Bytes the cache holds, by what they are for.
struct KvBytes {
  uint64_t codes = 0;
  uint64_t scales = 0;
  uint64_t padding = 0;  // layout padding inside rows
  uint64_t unused = 0;   // allocated page rows not yet filled
  uint64_t total() const { return codes + scales + padding + unused; }
};

class KvCache {
 public:
  // keySchemes/valueSchemes: one per layer.
  KvCache(KvGeometry geometry, std::vector<std::shared_ptr<const KvScheme>> keySchemes,
          std::vector<std::shared_ptr<const KvScheme>> valueSchemes);
  // The same scheme for every layer.
  KvCache(KvGeometry geometry, std::shared_ptr<const KvScheme> key,
          std::shared_ptr<const KvScheme> value);

  const KvGeometry& geometry() const { return m_geometry; }
  const KvScheme& scheme(uint32_t layer, KvPart part) const;
  uint32_t rowBytes(uint32_t layer, KvPart part) const;

  uint32_t rows() const { return m_rows; }
  uint32_t capacity() const {
    return static_cast<uint32_t>(m_pages.size()) * m_geometry.rowsPerPage;
  }

  // Makes room for rows [rows(), rows() + n) and counts them as present.
  // Allocation failure is kOutOfMemory and leaves the cache unchanged.
  Status append(uint32_t n);
  // Keeps rows [0, n); frees pages wholly past them. n > rows() is an error.
  Status trim(uint32_t n);

  // Bytes of row `index` (< rows()) of one stream.
  std::span<uint8_t> row(uint32_t layer, KvPart part, uint32_t head, uint32_t index);
  std::span<const uint8_t> row(uint32_t layer, KvPart part, uint32_t head, uint32_t index) const;
  // Encode / decode one row through the stream's scheme.
  void write(uint32_t layer, KvPart part, uint32_t head, uint32_t index,
             std::span<const float> values);
  void read(uint32_t layer, KvPart part, uint32_t head, uint32_t index,
            std::span<float> values) const;

  // Accounting of one layer or the whole cache (from the schemes' row layouts).
  KvBytes layerBytes(uint32_t layer, KvPart part) const;
  KvBytes bytes() const;
  // What the same rows would take at f16, for the compression ratio.
  uint64_t f16EquivalentBytes() const;

 private:
  size_t streamOffset(uint32_t layer, KvPart part, uint32_t head) const;

  KvGeometry m_geometry;
  std::vector<std::shared_ptr<const KvScheme>> m_schemes[2];  // [part][layer]
  std::vector<size_t> m_partOffset;  // [layer * 2 + part]: offset of that block in a page
  size_t m_pageBytes = 0;
  std::vector<std::unique_ptr<uint8_t[]>> m_pages;
  uint32_t m_rows = 0;
};

}  // namespace kvscope::kv
