#pragma once
// The indexer's settings and its row selection (KV_CODECS.md, Indexed
// attention). Each decode step, per layer and KV head, every page of cached
// rows gets a score from the sidecar (kv/kv_index.h); the rows attended are
//   the first `sinks` rows  +  the last `window` rows  +  the best pages,
// ceil(topK / pageRows) of them, among the pages not wholly inside sinks or
// window. A page is pageRows consecutive rows. selectRows() is that rule, the
// one every backend follows: pages are ranked by score, highest first, ties
// broken by the lower page index. When the picked pages, sinks and window
// cover every row (always when topK >= rows) the step is dense attention.
//
// Options text (the `--indexer` flag and the policy item `indexer=`):
//   TOP_K[:WINDOW[:SINKS]]     e.g. "512", "256:64", "128:32:4"; "off" or 0: off
// and the policy item indexer_scorer=NAME picks how the sidecar scores a page
// (kv/kv_index.h) and its size:
//   bounds16 (default), bounds32, bounds64     Quest's page bounds over 16/32/64 rows
//   meanstd16, meanstd32, meanstd64            the page's mean and spread (PageScore)
// docs/RESULTS.md measures them on the recall model at 4K tokens
// (resources/models/kvscope-recall-4k.md): mean+std captures a little more
// attention mass on running text (KLD 0.83-0.92x the bounds'), but the bounds find a
// copied span's one row far more often (the copy probe at top_k 512: 0.70-0.76
// against 0.41-0.48, dense attention 0.84-0.89), and finding such rows is
// what sparse attention must not lose. A per-row 4-bit sketch captured more
// mass still but 3-10x less per sidecar byte, and was dropped.
// and indexer_dense=N (default 2) keeps the first N cache layers on dense
// attention, as Quest does: the first layers attend broadly (on an earlier
// recall model the probe fell to 0.19-0.27 at top_k 64 with every layer
// selecting, and stayed within 0.03 of dense with the first two dense). Their
// sidecars are still written, so N can change without a rebuild.
// indexer_dense_heads=L.H+L.H... keeps single KV heads of selecting layers on
// dense attention (DuoAttention's retrieval heads): on the recall model one
// head of layer 2, the one its induction heads share, carried nearly all the
// loss at 4K tokens. Which heads is measured (runtime/indexer_heads.h,
// `kvscope-cli indexer-heads`): the heads whose selections capture the least
// of dense attention's softmax mass on running text.
// sparse_v=TAU (a separate policy item) drops each softmax weight below TAU
// (for its own query; the rest are not renormalized) and skips decoding V rows
// no query keeps, with or without the indexer.

#include <compare>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace kvscope::kv {

// How a sidecar page scores against a query q (kv/kv_index.h has the bytes).
enum class PageScore : uint8_t {
  // Quest's upper bound of q . k over the page: sum_i max(q_i lo_i, q_i hi_i).
  kBounds,
  // q . mean + 2 sqrt(sum_i (q_i std_i)^2): the mean score plus two standard
  // deviations, were the channels independent. Not a bound; a page whose one
  // key stands out scores low under it, while Quest's box over 16+ rows is
  // loose enough in 64+ channels that every page's bound looks alike (the
  // failure kekzl/imp reported at 82-127K, fixed by such a score).
  kMeanStd,
};

// One KV head of one cache layer.
struct KvHeadRef {
  uint32_t layer = 0, head = 0;
  auto operator<=>(const KvHeadRef&) const = default;
};

struct IndexerOptions {
  uint32_t topK = 0;     // rows picked by score per step (0: the indexer is off)
  uint32_t window = 64;  // the most recent rows, always attended
  uint32_t sinks = 4;    // the first rows, always attended (attention sinks)
  float sparseV = 0.0f;  // V rows weighted below this are skipped (0: none)
  uint32_t pageRows = 16;  // rows per sidecar page: 16, 32 or 64
  PageScore pageScore = PageScore::kBounds;
  uint32_t denseLayers = 2;  // the first cache layers attend every row
  // KV heads of selecting layers that attend every row; sorted, no repeats.
  std::vector<KvHeadRef> denseHeads;
  // "indexer_dense_heads=auto": the dense heads are still to be measured,
  // and until then every layer reads every row. runtime::Session measures
  // them once the context is long enough and hands the backend explicit
  // denseHeads; tools that run a backend without a session refuse it.
  bool autoDenseHeads = false;
  // Also compute dense attention scores, to report the share of the softmax
  // mass the selection captured (telemetry; costs a dense score pass).
  bool diagnostic = false;

  bool enabled() const { return topK > 0; }
  // Whether a decode step of cache layer `layer` selects its rows (the
  // indexer is on, the layer is not among the first denseLayers, and the
  // dense heads are not still to be measured: autoDenseHeads).
  bool selects(uint32_t layer) const {
    return enabled() && layer >= denseLayers && !autoDenseHeads;
  }
  // Whether (layer, head) is among denseHeads.
  bool denseHead(uint32_t layer, uint32_t head) const;
  // Whether a decode step of KV head `head` of cache layer `layer` attends
  // only its selection: the layer selects and the head is not dense.
  bool selectsHead(uint32_t layer, uint32_t head) const {
    return selects(layer) && !denseHead(layer, head);
  }
  bool operator==(const IndexerOptions&) const = default;
  // Parses TOP_K[:WINDOW[:SINKS]] into topK, window and sinks (others kept).
  static Status parseInto(std::string_view text, IndexerOptions& out);
  // "TOP_K:WINDOW:SINKS", or "off".
  std::string selectionText() const;
  // Sets pageScore and pageRows from a scorer name (above).
  static Status parseScorer(std::string_view name, IndexerOptions& out);
  std::string scorerText() const;
  // Sets denseHeads from "L.H+L.H..." (e.g. "2.0+3.1"; "none": no head), or
  // autoDenseHeads from "auto".
  static Status parseDenseHeads(std::string_view text, IndexerOptions& out);
  // "L.H+L.H...", or "none" (the heads themselves, measured ones included).
  std::string denseHeadsText() const;
  // The policy items these options write, each with a leading comma
  // (",indexer=512:64:4,sparse_v=0.001"; "" for the defaults, indexer off).
  std::string policyItems() const;
  // Ok when sparseV is in [0, 1), pageRows is 16, 32 or 64 and denseHeads is
  // sorted without repeats.
  Status check() const;
  // check(), and every dense head names a KV head of a cache layer:
  // headsKv[l] is cache layer l's KV head count.
  Status checkHeads(std::span<const uint32_t> headsKv) const;
};

// Cached rows [begin, end).
struct RowRun {
  uint32_t begin = 0, end = 0;
  bool operator==(const RowRun&) const = default;
};

// Whether the selection of a step over `rows` rows is every row (the indexer
// off, or sinks, window and the picked pages cover them all): then the step
// is dense attention. The same for every KV head and layer of the step.
bool selectsAll(const IndexerOptions& options, uint32_t rows);
// Pages a step picks by score: ceil(topK / pageRows).
uint32_t pickedPages(const IndexerOptions& options);

// The selection rule's options over a cache that keeps a precision tail of
// tailRows rows (kv/kv_cache.h; 0: none, or no layer keeps one): the window
// covers at least the tail, so a query attends every row it reads at f16
// (the rows kept at full precision are the recent ones; the Vulkan kernels
// attend the tail whole, beside the selection). Both backends select with
// these.
IndexerOptions selectionOptions(IndexerOptions options, uint32_t tailRows);

// Pages [0, ceil(rows / pageRows)) of one KV head's `rows` visible rows
// scored by `pageScores`; appends to `out` the selected rows in cache order as
// disjoint, non-adjacent runs. Returns false, leaving `out` empty, when the
// selection would be every row (the caller runs dense attention).
bool selectRows(const IndexerOptions& options, uint32_t rows, const float* pageScores,
                std::vector<RowRun>& out);

// Rows in `runs`.
uint32_t rowCount(const std::vector<RowRun>& runs);

}  // namespace kvscope::kv
