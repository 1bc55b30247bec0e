#pragma once
// The attention side of the Vulkan forward pass over a KV cache kept in pages
// on the device, with the numerics of CpuBackend::attention (for an f16 cache,
// queries and normalized softmax weights rounded to f16, see
// shaders/attention.comp; for any other codec, float32 throughout).
//
// Layout contract (identical to the host kv::KvCache): the cache is a list of
// pages, each its own Buffer; page p holds rows [p*R, (p+1)*R) of every
// stream as [layer][part K=0, V=1][KV head][R rows][rowBytes(layer, part)].
// Each (layer, part) stream has its own codec (gpu/kv_codec.h), so its own
// row size. Pages never move; growing the cache adds a page. A kernel binds
// at most kMaxPages pages, so one layer's context is at most kMaxPages * R
// rows, and a page must fit in maxStorageBufferRange (pages are bound whole).
// Sliding-window layers may live apart, in one ring page of ringRows rows
// (kv::KvLayout's ring): row r at slot r % ringRows. A ring layer's kernels
// get that page alone, which dispatchPaged binds in every page slot, and the
// shaders take page (r / rows per page) mod kMaxPages (KVS_PAGE_OF), so the
// ring is read and written wherever a row of it lands.
//
// The precision tail (kv/kv_layout.h): a layer with one keeps its last rows
// of K and V again at f16 (in the codecs' rotated space) in a ring buffer
// laid out as tailLayout()'s ring page. writeKv writes new rows there too;
// attend reads each query's tail rows from it in a pass of its own (f16 rows,
// float32 numerics, as CpuBackend reads them) beside the pass over the older
// rows' codes, the two passes' splits merged as one dispatch's are.
//
// Codecs: writeKv encodes new rows with each stream's codec on the device
// (shaders/kv_encode.comp, the kv scheme's bytes); attend reads the codes
// where it reads a row (shaders/kv_codec.glsl decodes groups of 8 values),
// never a dequantized copy of the cache. For a rotated K codec the queries
// are rotated once (q' = R_k q, shaders/kv_rotate.comp) and scored against
// the stored rotated rows (gamma * codebook values for turbo*); for a rotated V codec the weighted
// sum stays in V's rotated space and the output is rotated back once (R_v^T).
//
// Recording: each call records its dispatches and the barriers between them,
// but none before or after. The caller inserts Recorder::barrier() between
//   producer of k/v -> writeKv -> attend -> consumer of out
// and between producer of q -> attend; attend reads rows [0, pos0 + n) of the
// layer, so writeKv for those rows must come before it behind a barrier.
//
// Work is cut into tasks (KV head, tile of query tokens, split of the cached
// rows). Decode (few tokens) splits the rows until there are enough tasks to
// fill the device, then sums the splits with a reduction kernel; prefill tiles
// the query tokens and splits only where a driver caps an invocation's loop
// iterations (lavapipe: gpu/loop_limit.h), past the rows a task may loop
// over. On CPU devices a few workgroups loop over the tasks (lavapipe pays
// ~3 us per group), as many more as that cap needs. See AttentionShape for
// how a task maps to invocations.

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <utility>

#include <vector>

#include "gpu/buffer.h"
#include "gpu/kv_codec.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"

namespace kvscope::gpu {

// One layer's streams: nHeadKv KV heads of headDim values (kv::KvLayerShape
// on the device side; gpu does not depend on kv).
struct KvHeads {
  uint32_t nHeadKv = 0;
  uint32_t headDim = 0;
  bool operator==(const KvHeads&) const = default;
};

struct KvPageLayout {
  // [nLayer]: most models give every layer the same heads; Gemma 4's global
  // layers have fewer, wider ones than its window layers.
  std::vector<KvHeads> layers;
  uint32_t rowsPerPage = 0;       // R
  std::vector<KvStream> streams;  // [layer * 2 + part]: each stream's codec
  uint32_t ringRows = 0;          // rows of the ring page; 0: no ring
  std::vector<bool> ring;         // [nLayer] with a ring: the layer lives in it

  // Every stream f16 (kv::F16Scheme).
  static KvPageLayout f16(std::vector<KvHeads> layers, uint32_t rowsPerPage);
  // nLayer layers alike.
  static KvPageLayout f16(uint32_t nLayer, uint32_t nHeadKv, uint32_t headDim,
                          uint32_t rowsPerPage) {
    return f16(std::vector<KvHeads>(nLayer, {nHeadKv, headDim}), rowsPerPage);
  }
  uint32_t nLayer() const { return static_cast<uint32_t>(layers.size()); }
  uint32_t nHeadKv(uint32_t layer) const { return layers[layer].nHeadKv; }
  uint32_t headDim(uint32_t layer) const { return layers[layer].headDim; }
  // The widest layer's nHeadKv * headDim and headDim (scratch sizes).
  uint32_t widestKv() const;
  uint32_t widestHead() const;
  const KvStream& stream(uint32_t layer, uint32_t part) const {
    return streams[size_t{layer} * 2 + part];
  }
  bool inRing(uint32_t layer) const { return ringRows > 0 && layer < ring.size() && ring[layer]; }
  // Rows of the page that holds `layer`: ringRows in the ring, else R.
  uint32_t pageRows(uint32_t layer) const { return inRing(layer) ? ringRows : rowsPerPage; }
  // Bytes of one stored row of (layer, part), a multiple of 4.
  uint32_t rowBytes(uint32_t layer, uint32_t part) const {
    return kvCodecRowBytes(stream(layer, part).codec, headDim(layer));
  }
  // Bytes of one (layer, part) block of its page: [nHeadKv][pageRows][rowBytes].
  size_t partBytes(uint32_t layer, uint32_t part) const {
    return size_t{nHeadKv(layer)} * pageRows(layer) * rowBytes(layer, part);
  }
  // Where the (layer, part) block starts in its page: after every earlier
  // block of that page.
  size_t partOffset(uint32_t layer, uint32_t part) const;
  // Bytes of a growing page and of the ring page (0 without a ring).
  size_t pageBytes() const { return bytesOfPage(false); }
  size_t ringPageBytes() const { return bytesOfPage(true); }
  size_t bytesOfPage(bool ringPage) const;
  // Byte offset of cache row `row` of (layer, part, head) inside its page.
  size_t rowOffset(uint32_t layer, uint32_t part, uint32_t head, uint32_t row) const {
    const uint32_t rows = pageRows(layer);
    return partOffset(layer, part) + (size_t{head} * rows + row % rows) * rowBytes(layer, part);
  }
  // Whether some stream uses a rotated codec (attend and writeKv then need
  // AttentionScratch::rotated).
  bool rotated() const;

  // The precision tail: tailRows > 0 keeps the last tailRows rows of every
  // layer with tail[layer] in a ring of tailSlots rows per (part, KV head).
  uint32_t tailRows = 0, tailSlots = 0;
  std::vector<bool> tail;  // [nLayer]
  bool hasTail(uint32_t layer) const { return tailRows > 0 && layer < tail.size() && tail[layer]; }
  // The tail's ring as a layout of its own: f16 streams, the layers with a
  // tail in a ring page of tailSlots rows (its bytes: ringPageBytes()).
  KvPageLayout tailLayout() const;
};

// A cache's precision tail on the device (KvPageLayout::tailRows > 0): the
// ring buffer, and kv::CachedRows::tailFirst() of the step being recorded (no
// row below it is in the ring).
struct KvTailRing {
  const Buffer* buffer = nullptr;
  uint32_t floor = 0;
};

// Scratch sizes in bytes; 0 means the buffer is never read.
struct AttentionScratchBytes {
  size_t stats = 0;
  size_t partial = 0;
  size_t scores = 0;
  size_t rotated = 0;  // each of the two
};

// Device buffers attend() may use besides its inputs and output (see
// AttentionKernels::makeScratch). Empty buffers are allowed where unused.
struct AttentionScratch {
  Buffer stats;    // [splits][n][nHead] (max, sum) float pairs
  Buffer partial;  // [splits][n][nHead][headDim] float
  // Optional: [n][nHead][pos0 + n] float. When it is this large, the kGpu
  // shape's second pass reads the scores the first wrote instead of
  // recomputing them (kCpu always recomputes).
  Buffer scores;
  // With a rotated codec: [n][nHead][headDim] floats each. attend: the rotated
  // queries and the output in V's rotated space; writeKv: R_k k and R_v v.
  Buffer rotated[2];
};

// What the indexer's kernels follow of kv::IndexerOptions (kv/indexer.h; the
// backend fills it: gpu does not depend on kv).
struct IndexerShape {
  uint32_t pageRows = 16;     // rows of a sidecar page
  bool meanStd = false;       // kv::PageScore::kMeanStd's entries and score, else Quest's bounds
  uint32_t sinks = 4, window = 64;
  uint32_t pickedPages = 0;   // kv::pickedPages
  uint32_t entryBytes = 0;    // kv::KvIndex::entryBytesFor(the indexed layers' headDim)
  bool diagnostic = false;    // also measure the softmax mass the selection captured
  // [nLayer]: the layers it indexes (the global ones: a window layer attends
  // its few rows whole), which must share one KvHeads. Empty: every layer.
  std::vector<bool> layers;
};

// The indexer's device state for one cache (kv/kv_index.h's sidecar and an
// indexed step's buffers), made by AttentionKernels::makeIndexer.
// Its buffers hold the indexed layers only, each at its slot: [slot] below.
// The lists and mass have one more slot, `spare`: where a selection made for
// a KV-shared layer's query goes (SparseAttention::recorded false), so each
// layer's own slot shows its owner's last selection.
struct IndexerBuffers {
  static constexpr uint32_t kNotIndexed = ~0u;
  IndexerShape shape;
  std::vector<uint32_t> slots;  // [nLayer]: the layer's slot, or kNotIndexed
  uint32_t spare = 0;           // the lists' and mass's extra slot: the indexed layers' count
  KvHeads heads;                // every indexed layer's
  uint32_t sidecarPages = 0;    // sidecar pages per layer: ceil(maxRows / pageRows)
  uint32_t entryWords = 0;      // shape.entryBytes / 4
  uint32_t gatherRows = 0;      // rows a KV head's selection can hold (a multiple of 64)
  uint32_t listStride = 0;      // words per (slot, KV head) list: 1 + gatherRows
  Buffer sidecar;               // [slot][sidecarPages][nHeadKv][entryWords]: kv::KvIndex's entries
  Buffer pageScores;  // [nHeadKv][pages] float, the layer being attended
  // Host-visible [slot][nHeadKv][listStride]: the count, then the rows the
  // last indexed step attended, ascending (written only where it was sparse).
  Buffer lists;
  // The selected rows' codes (kv_gather.comp): a one-layer page of gatherRows
  // rows per KV head, sized for the widest indexed layer, then [nHeadKv] row
  // counts.
  Buffer gathered;
  // options.diagnostic: host-visible [slot][dense, selected] blocks of
  // massStride bytes, each [nHead] (max, sum of exp(score - max)) float pairs
  // of the last indexed step's softmax over all rows and over the selection.
  Buffer mass;
  size_t massStride = 0;
  // [nHead][headDim] float: a step's dense attention output of the dense
  // heads (SparseAttention::denseHeads) of a layer with some, copied into the
  // output there (the other heads' entries are not written or are stale).
  Buffer denseOut;

  bool indexes(uint32_t layer) const { return layer < slots.size() && slots[layer] != kNotIndexed; }
  // Words of `lists` before (indexed layer, KV head)'s list.
  size_t listAt(uint32_t layer, uint32_t head) const { return slotList(slots[layer], head); }
  size_t slotList(uint32_t slot, uint32_t head) const {
    return (size_t{slot} * heads.nHeadKv + head) * listStride;
  }
};

// Sparse attention for attend(): sparse V (with or without the indexer) and,
// for a decode step, attention over the rows the indexer selects by
// kv::selectRows's rule. The caller passes `indexer` only for steps whose
// selection is not every row (kv::selectsAll).
// How attend() weighs the rows: the scores' scale (0: 1/sqrt(head_dim)), and
// what sparse attention drops.
struct SparseAttention {
  float sparseV = 0.0f;
  const IndexerBuffers* indexer = nullptr;  // null: every row
  float scale = 0.0f;
  // A sliding window: the query at position p sees rows (p - window, p]; 0:
  // every row up to p. Not with the indexer.
  uint32_t window = 0;
  // Attention sinks, [nHead] floats: head h's softmax takes sinks[h] as one
  // more score that weighs no row (cpu_attention.h). Null: none.
  const BufferRange* sinks = nullptr;
  // With the indexer: whether the selection is the layer's own (recorded in
  // its lists and mass) or a KV-shared layer's (written to the spare slot).
  bool recorded = true;
  // With the indexer: the layer's KV heads that attend every row
  // (kv::IndexerOptions::denseHeads), ascending. Their query heads' output
  // comes from dense passes over those KV heads alone (one per run of
  // consecutive heads), the others' from the selection.
  std::span<const uint32_t> denseHeads;
};

// KV heads [first, first + count) of a layer (count 0: every one).
struct KvHeadRange {
  uint32_t first = 0, count = 0;
};

// How the kernels map a task to invocations.
enum class AttentionShape {
  kAuto,  // kCpu on CPU devices with 64-bit integers and subgroup arithmetic, else kGpu
  // A one-subgroup workgroup walks the rows one at a time, each invocation
  // owning a slice of head_dim in registers (shaders/attention_cpu.comp).
  kCpu,
  // 64 invocations: one row each for the scores, (pair, value column) items
  // for the weighted sum, through shared memory (shaders/attention.comp).
  kGpu,
};
const char* attentionShapeName(AttentionShape shape);

// How attend() cuts its work (exposed for benchmarks and tests).
struct AttentionPlan {
  uint32_t tokens = 1;      // query tokens per task
  uint32_t tokenTiles = 1;  // ceil(n / tokens)
  uint32_t splits = 1;      // ranges of cached rows per (KV head, token tile)
  uint32_t splitRows = 0;   // rows per range
  uint32_t groups = 1;      // workgroups per dispatch
  uint32_t rowStart = 0;    // the first row a query sees (a sliding window's start)
  // The most splits a plan of as many or fewer rows has: `splits` itself is
  // not monotone in the rows (whole 64-row splits: 256 rows take 4, 260
  // take 3), this bound is, so scratch is sized from it.
  uint32_t splitBound = 1;
  // For the loop limit: tasks, loop iterations of a task's rows, and its
  // (token, query head) pairs (each loops over every split's statistics).
  uint32_t tasks = 1, pairs = 1;
  uint64_t rowLoop = 0;
};

class AttentionKernels {
 public:
  // Page-array slots of every attention kernel (shaders/attention.h): with
  // the kernels' other bindings, within the 32 storage buffers per shader
  // stage that lavapipe allows (checked against the device when a pipeline
  // is created).
  static constexpr uint32_t kMaxPages = 16;
  // Invocations of the indexer's workgroups; kv_index.comp needs one per row
  // of a sidecar page, so pages hold at most this many rows.
  static constexpr uint32_t kIndexerWorkgroup = 64;

  explicit AttentionKernels(Context& ctx, AttentionShape shape = AttentionShape::kAuto);

  // The launch shape this instance uses (kAuto resolved).
  AttentionShape shape() const { return m_shape; }

  // Builds the pipelines a decode step of `layout` runs (every layer's
  // attention passes at one token: the split passes and their reduction
  // included), so that a driver that builds pipelines on first use (NVIDIA's)
  // does not do it inside the step that first splits its rows (on an H200
  // the bench's first split depth decoded at 232.8 tok/s, 457.3 once built).
  Status prepareDecode(const KvPageLayout& layout, uint32_t nHead);
  // Pipelines built so far (tests).
  size_t pipelineCount() const { return m_pipelines.size(); }

  // The plan of attend() for `layer` (its codecs decide the tile sizes).
  AttentionPlan plan(const KvPageLayout& layout, uint32_t nHead, uint32_t n, uint32_t pos0,
                     uint32_t layer = 0, uint32_t window = 0) const;
  // Scratch large enough for every attend() with n <= maxTokens and
  // pos0 + n <= maxRows (under a loop limit, a long prefill's splits
  // included; with a precision tail, its pass's); `scores` is sized for
  // decode (n = 1), kGpu only.
  AttentionScratchBytes scratchBytes(const KvPageLayout& layout, uint32_t nHead, uint32_t maxTokens,
                                     uint32_t maxRows) const;
  // Device buffers of scratchBytes(); kOutOfMemory when they do not fit.
  Expected<AttentionScratch> makeScratch(const KvPageLayout& layout, uint32_t nHead,
                                         uint32_t maxTokens, uint32_t maxRows) const;

  // Encodes k and v (float32 [n][nHeadKv * headDim] each, RoPE applied) with
  // the layer's K and V codecs (f16: round to nearest even) and stores them as
  // rows pos0 .. pos0 + n - 1 of `layer`. pages must cover those rows. One
  // dispatch for an f16 layer, else one per part, a rotated part preceded by
  // its rotation (then scratch.rotated must hold n * nHeadKv * headDim floats).
  // With `index`, the sidecar pages holding the new rows are then rebuilt
  // from the stored keys (indexRows). A layer with a precision tail also
  // writes the rows at f16 into tail.buffer (one more dispatch).
  Status writeKv(Recorder& rec, const KvPageLayout& layout, std::span<const Buffer* const> pages,
                 uint32_t layer, const Buffer& k, const Buffer& v, uint32_t n, uint32_t pos0,
                 const AttentionScratch& scratch = {}, const IndexerBuffers* index = nullptr,
                 const KvTailRing& tail = {});

  // Buffers for the indexer over a cache of at most maxRows rows (no indexed
  // layer is allowed: a cache of window layers only); kOutOfMemory when they
  // do not fit, kUnsupported for a head_dim not a multiple of 4 or indexed
  // layers of different KvHeads.
  Expected<IndexerBuffers> makeIndexer(const KvPageLayout& layout, uint32_t nHead,
                                       uint32_t maxRows, const IndexerShape& shape) const;
  // Rebuilds the sidecar entries of `layer` for the pages that hold rows
  // [firstRow, rows) from the keys stored in rows [0, rows): what writeKv
  // does for new rows, and what turning the indexer on does for all of them.
  // One dispatch, no barriers (the keys' writes must be behind one).
  Status indexRows(Recorder& rec, const KvPageLayout& layout, std::span<const Buffer* const> pages,
                   const IndexerBuffers& index, uint32_t layer, uint32_t firstRow, uint32_t rows);

  // The selection step of an indexed decode step over `rows` rows of `layer`:
  // from index.pageScores ([nHeadKv][ceil(rows / pageRows)]) to each KV head's
  // list in index.lists, by kv::selectRows's rule. The caller makes sure the
  // selection is not every row (kv::selectsAll). One dispatch, no barriers.
  Status selectRows(Recorder& rec, const IndexerBuffers& index, uint32_t layer, uint32_t rows);
  // The same into list slot `slot` (the spare one for a KV-shared layer).
  Status selectInto(Recorder& rec, const IndexerBuffers& index, uint32_t slot, uint32_t rows);

  // out[n][nHead * headDim] = causal attention of q[n][nHead * headDim]
  // (queries at positions pos0 .. pos0 + n - 1, RoPE applied) over rows
  // [0, pos0 + t] of `layer` for token t. Query head h reads KV head
  // h / (nHead / nHeadKv). One dispatch, or three (stats, partial outputs,
  // reduction) when the plan splits the rows; then scratch.stats and
  // scratch.partial must hold scratchBytes() for n and pos0 + n
  // (kInvalidArgument otherwise). A rotated K codec adds a rotation of q
  // before, a rotated V codec one of the output after (scratch.rotated).
  //
  // `sparse` drops normalized weights below sparseV (and skips V rows no
  // query keeps: on the GPU shape, batches of such rows). With its indexer and n == 1 the step runs
  // on the device without a host round trip: the pages are scored from the sidecar
  // (index_score.comp), each KV head's rows selected (index_select.comp,
  // into indexer->lists), their codes gathered (kv_gather.comp) and the
  // attention dispatches run over those indexer->gatherRows rows only (their
  // splits fit the scratch of scratchBytes(): gatherRows is a multiple of the
  // split alignment and at most maxRows rounded up to it); in diagnostic mode
  // two stats passes (every row, the selection) write indexer->mass.
  //
  // A layer with a precision tail reads each query's tail rows from
  // tail.buffer (two passes more, or more splits: scratchBytes() covers them);
  // an indexed step attends the selection less its tail rows (the selection
  // holds them all: kv::selectionOptions), and the tail whole. The
  // diagnostic's mass reads the codes.
  Status attend(Recorder& rec, const KvPageLayout& layout, std::span<const Buffer* const> pages,
                uint32_t layer, const Buffer& q, const Buffer& out, uint32_t n, uint32_t pos0,
                uint32_t nHead, const AttentionScratch& scratch = {},
                const SparseAttention& sparse = {}, const KvTailRing& tail = {});

 private:
  enum class Kind {
    kKvWrite, kStats, kOut, kReduce, kEncode, kRotate, kRotateBack,
    kIndexWrite, kIndexScore, kIndexSelect, kGather,
  };
  // What selects a pipeline besides its kind (fields a kind ignores stay empty).
  struct Variant {
    uint32_t headDim = 0, gqa = 0, tokens = 0, chunkWords = 0;
    uint32_t meanStd = 0;  // the indexer's kinds: IndexerShape::meanStd
    // Attention kinds: the codec shader (float32 numerics) even for f16 rows
    // (a precision tail's pass).
    bool float32 = false;
    KvCodec key = KvCodec::kF16, value = KvCodec::kF16;
    std::vector<float> keyCodebook, valueCodebook;
    auto operator<=>(const Variant&) const = default;
  };
  Expected<const Pipeline*> pipeline(Kind kind, const Variant& v);
  // One dispatch's worth of attend(): the rows [plan.rowStart, ...) of
  // `layer` of `layout` in `pages` for `heads`, and which side of each
  // query's precision tail it reads (push::AttentionPush::tailSide).
  struct Pass {
    const KvPageLayout* layout = nullptr;
    std::span<const Buffer* const> pages;
    uint32_t layer = 0;
    uint32_t pos0 = 0;  // the first query's row (an indexed step's gathered rows: their last)
    AttentionPlan plan;
    uint32_t tailSide = 0, tailRows = 0;  // see push::AttentionPush
    uint32_t rowCounts = 0, countTrim = 0;
    KvHeadRange heads;
  };
  // The passes of attend() over `heads` of `layer` (without the indexer):
  // its codes, all of them or those older than each query's tail, and then
  // the tail. tailLayout: layout.tailLayout() where the layer keeps a tail
  // (the tail pass points into it), else null.
  std::vector<Pass> passes(const KvPageLayout& layout, const KvPageLayout* tailLayout,
                           std::span<const Buffer* const> pages, uint32_t layer, uint32_t n,
                           uint32_t pos0, uint32_t nHead, uint32_t window, const KvTailRing& tail,
                           KvHeadRange heads = {}) const;
  // The pass over the tail's ring: each query's tail rows.
  Pass tailPass(const KvPageLayout& layout, const KvPageLayout& tailLayout, uint32_t layer,
                uint32_t n, uint32_t pos0, uint32_t nHead, uint32_t window, const KvTailRing& tail,
                KvHeadRange heads = {}) const;
  // The first row the query at p reads from the tail (the shaders' tailStart).
  static uint32_t tailStart(const KvPageLayout& layout, const KvTailRing& tail, uint32_t p);
  // attend() after the rotation of q: `query` in K's space, `target` in V's,
  // over `passes` (their splits merged by the reduction when more than one).
  Status attendPasses(Recorder& rec, std::span<const Pass> passes, const Buffer& q,
                      const Buffer& query, const Buffer& target, uint32_t n, uint32_t nHead,
                      const AttentionScratch& scratch, const SparseAttention& sparse,
                      const KvTailRing& tail);
  // The indexed decode step of attend() (attention_indexer.cpp).
  Status attendSelected(Recorder& rec, const KvPageLayout& layout,
                        std::span<const Buffer* const> pages, uint32_t layer, const Buffer& q,
                        const Buffer& query, const Buffer& target, uint32_t pos0, uint32_t nHead,
                        const AttentionScratch& scratch, const SparseAttention& sparse,
                        const KvTailRing& tail);
  // One stats pass of the decode query over the rows of `layer` (one split):
  // (max, sum) per query head into `mass` from byte `offset` (diagnostic mode).
  Status recordStats(Recorder& rec, const KvPageLayout& layout, std::span<const Buffer* const> pages,
                     uint32_t layer, const Buffer& query, uint32_t pos0, uint32_t nHead,
                     uint32_t rowCounts, float scale, const Buffer& mass, size_t offset);
  Variant attentionVariant(const KvPageLayout& layout, uint32_t layer, uint32_t nHead,
                           uint32_t tokens, bool float32 = false) const;
  // plan() over rows [rowBegin, rowEnd) of `kvHeads` KV heads (0: every
  // one; float32: the codec shader's tiles).
  AttentionPlan planRows(const KvPageLayout& layout, uint32_t nHead, uint32_t n, uint32_t layer,
                         uint32_t rowBegin, uint32_t rowEnd, bool float32,
                         uint32_t kvHeads = 0) const;
  Status checkPages(const KvPageLayout& layout, std::span<const Buffer* const> pages,
                    uint32_t layer, uint32_t rows) const;
  // Records out = R in (back: R^T in) for `count` vectors of headDim floats.
  Status rotate(Recorder& rec, const KvStream& stream, uint32_t headDim, const Buffer& in,
                const Buffer& out, uint32_t count, bool back);
  uint32_t tokensPerTask(uint32_t headDim, bool codec, uint32_t gqa, uint32_t n) const;
  // p.groups for a dispatch whose tasks also loop over `allSplits` splits'
  // statistics (its own and other passes').
  void group(AttentionPlan& p, uint32_t allSplits) const;
  uint32_t groupCap() const;
  uint64_t rowIterations(uint32_t pairs, uint32_t words) const;

  Context& m_ctx;
  AttentionShape m_shape;
  uint32_t m_workgroup = 0;   // invocations of an attention workgroup = rows per tile
  uint32_t m_cpuThreads = 0;  // >0 on CPU devices: the device's worker threads
  bool m_dynamicIndexing = false;
  std::map<std::pair<Kind, Variant>, Pipeline> m_pipelines;
};

}  // namespace kvscope::gpu
