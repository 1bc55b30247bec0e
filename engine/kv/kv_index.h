#pragma once
// KvIndex: the indexer's sidecar (kv/indexer.h). Per layer, KV head and page
// of pageRows consecutive cached rows, the per-channel lower and upper bounds
// of the page's keys, as Quest keeps them: a page scores against a query q by
//   sum_i max(q_i lo_i, q_i hi_i) >= q . k   for every key k of the page.
// The bounds are taken from the keys as the cache stores them (decoded, in
// the K scheme's own space: rotated for a rotated scheme, where q is rotated
// too and q . k is unchanged). So the bound holds for the scores attention
// computes, and rebuilding a page from the cached rows (trim, or turning the
// indexer on mid-conversation) gives the bytes appending gave.
//
// Entry, one per (layer, page, head), entryBytes() bytes:
//   i8 lo[headDim] | i8 hi[headDim] | i8 e | zero padding to a multiple of 4
// with value = code * 2^e. A row that needs a larger e than its page has
// coarsens the page's codes first (lo rounded down, hi up), so the bounds
// only widen; each row's own codes are floor(x / 2^e) and ceil(x / 2^e),
// |code| <= 127. At headDim 64 a page of 16 rows takes 132 bytes, 8.25 per
// row (an f16 key row is 128).
//
// Rows must be added in order per (layer, head): row i after rows 0 .. i-1.

#include <cstdint>
#include <span>
#include <vector>

#include "kv/indexer.h"
#include "kv/kv_layout.h"

namespace kvscope::kv {

class KvIndex {
 public:
  KvIndex(std::span<const KvLayerShape> layers, uint32_t pageRows);

  uint32_t dim(uint32_t layer) const { return m_layers[layer].headDim; }
  uint32_t pageRows() const { return m_pageRows; }
  uint32_t entryBytes(uint32_t layer) const { return entryBytesFor(dim(layer)); }
  // Bytes of one entry for rows of headDim values, and what the sidecar adds
  // per cached row and KV head (entry / pageRows): the memory estimate's figure.
  static uint32_t entryBytesFor(uint32_t headDim);
  static double bytesPerRow(uint32_t headDim, const IndexerOptions& options);
  // What the sidecar adds per cached token over every global layer of `g`
  // (window layers have none).
  static double sidecarBytesPerToken(const KvGeometry& g, const IndexerOptions& options);
  // Rows indexed for (layer, head).
  uint32_t rows(uint32_t layer, uint32_t head) const { return m_rows[layer][head]; }

  // Folds key row `index` (== rows(layer, head); dim(layer) floats) into its page.
  void add(uint32_t layer, uint32_t head, uint32_t index, const float* key);
  // Forgets rows [n, rows) of every stream; the caller re-adds the rows
  // [n / pageRows * pageRows, n) of the page left partial.
  void truncate(uint32_t n);

  // The entry of (layer, page, head).
  const int8_t* entry(uint32_t layer, uint32_t page, uint32_t head) const;
  // scores[p] = the bound of page p against q (dim(layer) floats) for pages
  // [0, pages); with `keepMax`, scores[p] = max(scores[p], bound) (the query
  // heads of a GQA group). The reference of cpu::scoreGroupPages.
  void scorePages(uint32_t layer, uint32_t head, const float* q, uint32_t pages, float* scores,
                  bool keepMax) const;

  // Bytes of the entries of one layer's indexed pages (all heads).
  uint64_t layerBytes(uint32_t layer) const;

 private:
  int8_t* entry(uint32_t layer, uint32_t page, uint32_t head);
  // Bytes of one page's entries of `layer` (all its heads).
  size_t pageBytes(uint32_t layer) const {
    return size_t{m_layers[layer].nHeadKv} * entryBytes(layer);
  }

  std::vector<KvLayerShape> m_layers;
  uint32_t m_pageRows;
  std::vector<std::vector<int8_t>> m_entries;  // [layer][page][head][entryBytes(layer)]
  std::vector<std::vector<uint32_t>> m_rows;   // [layer][head]
};

}  // namespace kvscope::kv
