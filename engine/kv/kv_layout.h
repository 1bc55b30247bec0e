#pragma once
// KvLayout: the one description of a paged KV cache that both backends use
// (kv::KvCache on the host, the Vulkan backend's device pages).
//
// A page holds rowsPerPage (R) rows of every (layer, K|V, KV head) stream:
//   page[layer][part][head][R][rowBytes(layer, part)]
// Each stream's scheme is built for headDim with streamSeed(cacheSeed, layer,
// part), here and nowhere else, so two layouts from the same schemes and seed
// encode identically. R is a parameter of the backend (the CPU keeps 256; the
// Vulkan backend grows it with the context, gpu::AttentionKernels::kMaxPages),
// and nothing outside the pages depends on it: the canonical row order
// ([layer][part][head][row 0..n)) of a saved cache ignores it.
//
// Accounting lives here too: bytes(rows, capacity) splits the rows' bytes by
// what they are (codes, scales, padding, unused page rows) from the schemes'
// row layouts; the indexer's sidecar is counted by its owner (KvIndex).

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

// Bytes a cache holds, by what they are for.
struct KvBytes {
  uint64_t codes = 0;
  uint64_t scales = 0;
  uint64_t sidecar = 0;  // the indexer's page bounds (K only)
  uint64_t padding = 0;  // layout padding inside rows
  uint64_t unused = 0;   // allocated page rows not yet filled
  // What the cached rows take: everything but `unused`.
  uint64_t used() const { return codes + scales + sidecar + padding; }
  uint64_t total() const { return used() + unused; }
  KvBytes& operator+=(const KvBytes& o);
};

class KvLayout {
 public:
  // One LayerSchemes per layer. Errors: bad geometry, unknown scheme, a
  // scheme that cannot take headDim.
  static Expected<KvLayout> create(KvGeometry geometry, std::span<const LayerSchemes> layers,
                                   uint64_t cacheSeed = kDefaultCacheSeed);

  const KvGeometry& geometry() const { return m_geometry; }
  uint64_t cacheSeed() const { return m_cacheSeed; }
  const KvScheme& scheme(uint32_t layer, KvPart part) const { return *stream(layer, part).scheme; }
  uint32_t rowBytes(uint32_t layer, KvPart part) const { return stream(layer, part).rowBytes; }
  std::vector<LayerSchemes> layerSchemes() const;

  // Bytes of one page, and where the (layer, part) block [nHeadKv][R][rowBytes]
  // starts in it.
  size_t pageBytes() const { return m_pageBytes; }
  size_t partOffset(uint32_t layer, KvPart part) const { return stream(layer, part).partOffset; }
  size_t partBytes(uint32_t layer, KvPart part) const {
    return size_t{m_geometry.nHeadKv} * m_geometry.rowsPerPage * rowBytes(layer, part);
  }
  // Byte offset of cache row `row` of (layer, part, head) inside page row / R.
  size_t rowOffset(uint32_t layer, KvPart part, uint32_t head, uint32_t row) const {
    return partOffset(layer, part) +
           (size_t{head} * m_geometry.rowsPerPage + row % m_geometry.rowsPerPage) *
               rowBytes(layer, part);
  }
  // Pages that hold `rows` rows.
  size_t pagesFor(uint64_t rows) const {
    return static_cast<size_t>((rows + m_geometry.rowsPerPage - 1) / m_geometry.rowsPerPage);
  }
  // Bytes one token takes in every stream: Σ layers, parts of nHeadKv x rowBytes.
  uint64_t tokenBytes() const;

  // The accounting of `rows` rows of one stream in pages holding `capacity`
  // rows (sidecar left 0), and the same rows at f16, for compression ratios.
  KvBytes bytes(uint32_t layer, KvPart part, uint64_t rows, uint64_t capacity) const;
  uint64_t f16Bytes(uint64_t rows) const;

  // Whether both store the same bytes for the same rows: same geometry but
  // R, same cache seed and scheme names.
  bool sameStreams(const KvLayout& other) const;

 private:
  struct Stream {  // one (layer, K|V) stream
    std::shared_ptr<const KvScheme> scheme;
    uint32_t rowBytes = 0;  // scheme->rowBytes(), a multiple of 4
    size_t partOffset = 0;
  };
  const Stream& stream(uint32_t layer, KvPart part) const {
    return m_streams[size_t{layer} * 2 + static_cast<size_t>(part)];
  }

  KvGeometry m_geometry;
  uint64_t m_cacheSeed = kDefaultCacheSeed;
  std::vector<Stream> m_streams;  // [nLayer * 2]: layer, then K, V
  size_t m_pageBytes = 0;
};

}  // namespace kvscope::kv
