#pragma once
// KvIndex: the indexer's sidecar (kv/indexer.h). Per layer, KV head and page
// of pageRows consecutive cached rows, one entry that scores the page against
// a query (kv::PageScore). The entries are taken from the keys as the cache
// stores them (decoded, in the K scheme's own space: rotated for a rotated
// scheme, where q is rotated too and q . k is unchanged), and each is a
// function of its page's rows alone, so rebuilding a page from the cached
// rows (trim, or turning the indexer on mid-conversation) gives the bytes
// appending gave. Both kinds put a page's keys on one grid: e is the largest
// of its rows' exponents, a row's being the smallest e in [-100, 100] with
// max|x| <= 127 * 2^e (NaN counts as 0).
//
// PageScore::kBounds, Quest's per-channel lower and upper bounds:
//   i8 lo[headDim] | i8 hi[headDim] | i8 e | zero padding to a multiple of 4
// with value = code * 2^e, lo the minimum of floor(x / 2^e) and hi the
// maximum of ceil(x / 2^e) over the page's rows, |code| <= 127; the page
// scores sum_i max(q_i lo_i, q_i hi_i) * 2^e >= q . k for every key k of it.
//
// PageScore::kMeanStd, the per-channel mean and standard deviation:
//   i8 mean[headDim] | i8 std[headDim] | i8 e | zero padding to a multiple of 4
// from the rows' codes c = x / 2^e rounded to nearest (ties to even) over the
// page's n rows, in integers: mean = round(sum c / n), std = round(sqrt(n sum
// c^2 - (sum c)^2) / n) (halves away from zero). Exact integer arithmetic, so
// the device's sidecar (shaders/kv_index.comp) has the same bytes. The page
// scores (q . mean + 2 sqrt(sum_i (q_i std_i)^2)) * 2^e.
//
// At headDim 64 an entry is 132 bytes, 8.25 per row of a 16-row page (an f16
// key row is 128). Rows must be added in order per (layer, head): row i
// after rows 0 .. i-1.

#include <cstdint>
#include <span>
#include <vector>

#include "kv/indexer.h"
#include "kv/kv_layout.h"

namespace kvscope::kv {

class KvIndex {
 public:
  // kMeanStd's weight of the standard deviation term.
  static constexpr float kStdWeight = 2.0f;

  KvIndex(std::span<const KvLayerShape> layers, uint32_t pageRows, PageScore score);

  uint32_t dim(uint32_t layer) const { return m_layers[layer].headDim; }
  uint32_t pageRows() const { return m_pageRows; }
  PageScore score() const { return m_score; }
  uint32_t entryBytes(uint32_t layer) const { return entryBytesFor(dim(layer)); }
  // Bytes of one entry for rows of headDim values (either kind), and what the sidecar adds
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
  // scores[p] = the score of page p against q (dim(layer) floats) for pages
  // [0, pages); with `keepMax`, scores[p] = max(scores[p], score) (the query
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

  // kMeanStd: a stream's last page, [pageRows][dim] rows kept because a
  // later row with a larger exponent moves the page to a coarser grid, where
  // the earlier rows' codes are rounded again from their values; and the
  // sums of the rows' codes on the current grid e, so that a row that fits
  // the grid costs O(dim).
  struct OpenPage {
    std::vector<float> rows;
    std::vector<int32_t> sum, squares;  // [dim]: sum c and sum c^2
    int e;
  };

  void addBound(uint32_t layer, uint32_t head, uint32_t rows, const float* key);
  void addMoments(uint32_t layer, uint32_t head, uint32_t rows, const float* key);
  static void accumulate(OpenPage& open, const float* row, uint32_t d);

  std::vector<KvLayerShape> m_layers;
  uint32_t m_pageRows;
  PageScore m_score;
  std::vector<std::vector<int8_t>> m_entries;  // [layer][page][head][entryBytes(layer)]
  std::vector<std::vector<uint32_t>> m_rows;   // [layer][head]
  std::vector<std::vector<OpenPage>> m_open;   // kMeanStd: [layer][head]
};

}  // namespace kvscope::kv
