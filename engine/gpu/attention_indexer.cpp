// The indexer's part of AttentionKernels (gpu/attention_kernels.h): the
// sidecar kept on the device, and an indexed decode step as score, select,
// gather, attend. The selection rule is kv::selectRows's (kv/indexer.h),
// followed by shaders/index_select.comp.
#include <algorithm>
#include <optional>

#include "gpu/attention_kernels.h"
#include "gpu/loop_limit.h"
#include "shaders/attention.h"

namespace kvscope::gpu {
namespace {

constexpr uint32_t kGatherAlign = 64;       // gathered rows per KV head: a multiple of this

// The gathered page as a one-layer cache of `layer`'s codecs.
KvPageLayout gatheredLayout(const KvPageLayout& layout, uint32_t layer, uint32_t gatherRows) {
  return {{layout.layers[layer]}, gatherRows, {layout.stream(layer, 0), layout.stream(layer, 1)}};
}

// The fields of index_select.comp (and the page count of index_score.comp).
push::IndexerPush selectionPush(const IndexerBuffers& ix, uint32_t slot, uint32_t rows) {
  push::IndexerPush push{};
  push.nHeadKv = ix.heads.nHeadKv;
  push.pageRows = ix.shape.pageRows;
  push.pages = ceilDiv(rows, ix.shape.pageRows);
  push.rows = rows;
  push.sinks = ix.shape.sinks;
  push.window = ix.shape.window;
  push.wanted = ix.shape.pickedPages;
  push.listBase = static_cast<uint32_t>(ix.slotList(slot, 0));
  push.listStride = ix.listStride;
  return push;
}

// Every field the indexer's kernels read for `layer` over `rows` cached rows,
// its selection written to list slot `slot`.
push::IndexerPush indexerPush(const IndexerBuffers& ix, const KvPageLayout& layout, uint32_t layer,
                              uint32_t slot, uint32_t rows) {
  push::IndexerPush push = selectionPush(ix, slot, rows);
  push.rowsPerPage = layout.rowsPerPage;
  push.keyRowWords = layout.rowBytes(layer, 0) / 4;
  push.keyOffset = static_cast<uint32_t>(layout.partOffset(layer, 0) / 4);
  push.valueRowWords = layout.rowBytes(layer, 1) / 4;
  push.valueOffset = static_cast<uint32_t>(layout.partOffset(layer, 1) / 4);
  push.entryWords = ix.entryWords;
  push.sidecarBase = ix.slots[layer] * ix.sidecarPages * ix.heads.nHeadKv * ix.entryWords;
  push.gatherRows = ix.gatherRows;
  return push;
}

}  // namespace

Expected<IndexerBuffers> AttentionKernels::makeIndexer(const KvPageLayout& layout, uint32_t nHead,
                                                       uint32_t maxRows,
                                                       const IndexerShape& shape) const {
  IndexerBuffers b;
  b.shape = shape;
  // The indexed layers' slots, and the shape they share.
  uint32_t indexed = 0;
  for (uint32_t l = 0; l < layout.nLayer(); ++l) {
    const bool covered = shape.layers.empty() || (l < shape.layers.size() && shape.layers[l]);
    b.slots.push_back(covered ? indexed++ : IndexerBuffers::kNotIndexed);
    if (!covered) continue;
    if (indexed == 1) b.heads = layout.layers[l];
    if (layout.layers[l] != b.heads) {
      return makeError(ErrorCode::kUnsupported,
                       "the indexer on Vulkan needs its layers alike; layer {} has {} KV heads of "
                       "{} values, an earlier one {} of {}",
                       l, layout.nHeadKv(l), layout.headDim(l), b.heads.nHeadKv, b.heads.headDim);
    }
  }
  // No indexed layer (every layer a window layer): buffers for the spare
  // slot only, which no step selects into.
  if (indexed == 0) b.heads = layout.layers.empty() ? KvHeads{1, 4} : layout.layers[0];
  if (b.heads.headDim % 4 != 0) {
    return makeError(ErrorCode::kUnsupported,
                     "the indexer on Vulkan needs head_dim a multiple of 4 (the model has {})",
                     b.heads.headDim);
  }
  if (shape.pageRows == 0 || shape.pageRows > kIndexerWorkgroup ||
      layout.rowsPerPage % shape.pageRows != 0 || shape.entryBytes % 4 != 0 ||
      shape.entryBytes < 2 * b.heads.headDim + 1) {
    return makeError(ErrorCode::kInvalidArgument,
                     "indexer pages of {} rows with {}-byte entries do not fit KV pages of {} rows",
                     shape.pageRows, shape.entryBytes, layout.rowsPerPage);
  }
  b.sidecarPages = ceilDiv(maxRows, shape.pageRows);
  b.entryWords = shape.entryBytes / 4;
  // A list holds at most the sinks, the window and the picked pages.
  const uint64_t most = uint64_t{shape.sinks} + shape.window + uint64_t{shape.pickedPages} * shape.pageRows;
  b.gatherRows = ceilDiv(std::min<uint64_t>(most, maxRows), kGatherAlign) * kGatherAlign;
  b.listStride = 1 + b.gatherRows;
  const uint32_t heads = b.heads.nHeadKv;
  uint32_t widest = 0;
  for (uint32_t l = 0; l < layout.nLayer(); ++l)
    if (b.indexes(l)) widest = std::max(widest, layout.rowBytes(l, 0) + layout.rowBytes(l, 1));
  // (At least a word: a device buffer is never empty.)
  const size_t sidecar =
      std::max<size_t>(4, size_t{indexed} * b.sidecarPages * heads * shape.entryBytes);
  b.spare = indexed;
  const size_t lists = size_t{indexed + 1} * heads * b.listStride * sizeof(uint32_t);
  const size_t gathered = size_t{heads} * b.gatherRows * widest + size_t{heads} * sizeof(uint32_t);
  const uint64_t range = m_ctx.limits().maxStorageBufferRange;
  if (std::max({sidecar, lists, gathered}) > range) {
    return makeError(ErrorCode::kUnsupported,
                     "the indexer's buffers for {} rows need {} bytes in one binding; {} binds at "
                     "most {} (use a shorter context or bounds32/bounds64)",
                     maxRows, std::max({sidecar, lists, gathered}), m_ctx.info().name, range);
  }
  KVS_ASSIGN_OR_RETURN(b.sidecar, Buffer::create(m_ctx, sidecar));
  KVS_ASSIGN_OR_RETURN(b.pageScores,
                       Buffer::create(m_ctx, size_t{heads} * b.sidecarPages * sizeof(float)));
  KVS_ASSIGN_OR_RETURN(b.lists, Buffer::create(m_ctx, lists, MemoryUse::kHost));
  KVS_ASSIGN_OR_RETURN(b.gathered, Buffer::create(m_ctx, gathered));
  if (shape.diagnostic) {
    const size_t align = std::max<size_t>(m_ctx.limits().minStorageBufferOffsetAlignment, 4);
    b.massStride = (size_t{nHead} * 2 * sizeof(float) + align - 1) / align * align;
    KVS_ASSIGN_OR_RETURN(b.mass,
                         Buffer::create(m_ctx, b.massStride * 2 * (indexed + 1), MemoryUse::kHost));
  }
  KVS_ASSIGN_OR_RETURN(b.denseOut,
                       Buffer::create(m_ctx, size_t{nHead} * b.heads.headDim * sizeof(float)));
  return b;
}

Status AttentionKernels::indexRows(Recorder& rec, const KvPageLayout& layout,
                                   std::span<const Buffer* const> pages,
                                   const IndexerBuffers& index, uint32_t layer, uint32_t firstRow,
                                   uint32_t rows) {
  if (firstRow >= rows) return okStatus();
  KVS_TRY(checkPages(layout, pages, layer, rows));
  if (!index.indexes(layer))
    return makeError(ErrorCode::kInvalidArgument, "layer {} has no indexer sidecar", layer);
  const uint32_t pageRows = index.shape.pageRows;
  if (ceilDiv(rows, pageRows) > index.sidecarPages) {
    return makeError(ErrorCode::kInvalidArgument, "{} rows overflow an indexer sidecar of {} pages",
                     rows, index.sidecarPages);
  }
  const KvStream& ks = layout.stream(layer, 0);
  Variant variant;
  variant.headDim = layout.headDim(layer);
  variant.key = ks.codec;
  variant.keyCodebook = ks.codebook;
  variant.meanStd = index.shape.meanStd;
  KVS_ASSIGN_OR_RETURN(const Pipeline* p, pipeline(Kind::kIndexWrite, variant));
  push::IndexerPush push = indexerPush(index, layout, layer, index.slots[layer], rows);
  push.firstPage = firstRow / pageRows;
  push.pages = ceilDiv(rows, pageRows) - push.firstPage;
  // A workgroup per (page, KV head) entry, up to groupCap() looping over
  // them; an entry costs an invocation a loop over the row's groups and two
  // over the page's rows.
  const uint32_t entries = push.pages * layout.nHeadKv(layer);
  const uint64_t perEntry = ceilDiv(variant.headDim, 8) + 2 * uint64_t{pageRows} + 16;
  rec.dispatchPaged(*p, {index.sidecar}, pages, push,
                    groupsWithinLoopLimit(entries, perEntry, std::min(entries, groupCap()),
                                          m_ctx.info().loopIterationLimit,
                                          m_ctx.limits().maxComputeWorkGroupCount[0]));
  return okStatus();
}

Status AttentionKernels::selectRows(Recorder& rec, const IndexerBuffers& index, uint32_t layer,
                                    uint32_t rows) {
  if (!index.indexes(layer))
    return makeError(ErrorCode::kInvalidArgument, "layer {} has no indexer sidecar", layer);
  return selectInto(rec, index, index.slots[layer], rows);
}

Status AttentionKernels::selectInto(Recorder& rec, const IndexerBuffers& index, uint32_t slot,
                                    uint32_t rows) {
  const uint32_t nHeadKv = index.heads.nHeadKv;
  if (rows == 0 || slot > index.spare || ceilDiv(rows, index.shape.pageRows) > index.sidecarPages ||
      index.pageScores.size() < size_t{nHeadKv} * ceilDiv(rows, index.shape.pageRows) * 4 ||
      index.lists.size() < (index.slotList(slot, 0) + size_t{nHeadKv} * index.listStride) * 4) {
    return makeError(ErrorCode::kInvalidArgument,
                     "an indexer selection over {} rows into slot {} does not fit its buffers",
                     rows, slot);
  }
  KVS_ASSIGN_OR_RETURN(const Pipeline* select, pipeline(Kind::kIndexSelect, {}));
  rec.dispatch(*select, {index.pageScores, index.lists}, selectionPush(index, slot, rows), nHeadKv);
  return okStatus();
}

Status AttentionKernels::attendSelected(Recorder& rec, const KvPageLayout& layout,
                                        std::span<const Buffer* const> pages, uint32_t layer,
                                        const Buffer& q, const Buffer& query, const Buffer& target,
                                        uint32_t pos0, uint32_t nHead,
                                        const AttentionScratch& scratch,
                                        const SparseAttention& sparse, const KvTailRing& tail) {
  const IndexerBuffers& ix = *sparse.indexer;
  const uint32_t rows = pos0 + 1;
  if (!ix.indexes(layer))
    return makeError(ErrorCode::kInvalidArgument, "layer {} has no indexer sidecar", layer);
  if (ceilDiv(rows, ix.shape.pageRows) > ix.sidecarPages) {
    return makeError(ErrorCode::kInvalidArgument, "{} rows overflow an indexer sidecar of {} pages",
                     rows, ix.sidecarPages);
  }
  const uint32_t slot = sparse.recorded ? ix.slots[layer] : ix.spare;
  const push::IndexerPush push = indexerPush(ix, layout, layer, slot, rows);
  Variant scoring;
  const uint32_t nHeadKv = layout.nHeadKv(layer);
  scoring.headDim = layout.headDim(layer);
  scoring.gqa = nHead / nHeadKv;
  scoring.meanStd = ix.shape.meanStd;
  KVS_ASSIGN_OR_RETURN(const Pipeline* score, pipeline(Kind::kIndexScore, scoring));
  KVS_ASSIGN_OR_RETURN(const Pipeline* gather, pipeline(Kind::kGather, {}));
  rec.dispatch(*score, {ix.sidecar, query, ix.pageScores}, push,
               ceilDiv(size_t{nHeadKv} * push.pages, kIndexerWorkgroup));
  rec.barrier();
  KVS_TRY(selectInto(rec, ix, slot, rows));
  rec.barrier();
  // kv_gather.comp: tasks of kIndexerWorkgroup list slots.
  rec.dispatchPaged(*gather, {ix.lists, ix.gathered}, pages, push,
                    std::min(nHeadKv * ceilDiv(ix.gatherRows, kIndexerWorkgroup), groupCap()));
  rec.barrier();
  const KvPageLayout gathered = gatheredLayout(layout, layer, ix.gatherRows);
  const Buffer* gatheredPage[] = {&ix.gathered};
  const auto counts = static_cast<uint32_t>(gathered.pageBytes() / 4);
  // The gathered rows, every one visible; with a precision tail, less the
  // last ones, the tail's (the selection holds them all, kv::selectionOptions),
  // which a pass over the tail reads whole.
  std::optional<KvPageLayout> tailLayout;
  if (layout.hasTail(layer)) tailLayout = layout.tailLayout();
  std::vector<Pass> selected = {{&gathered, gatheredPage, 0, ix.gatherRows - 1,
                                 planRows(gathered, nHead, 1, 0, 0, ix.gatherRows, false)}};
  selected.front().rowCounts = counts;
  if (tailLayout) {
    selected.push_back(tailPass(layout, *tailLayout, layer, 1, pos0, nHead, sparse.window, tail));
    selected.front().countTrim = pos0 + 1 - selected.back().plan.rowStart;
  }
  KVS_TRY(attendPasses(rec, selected, q, query, target, 1, nHead, scratch, sparse, tail));
  if (!sparse.denseHeads.empty()) {
    // Dense heads: per run of consecutive dense KV heads, their query heads
    // attend every row (into denseOut) and are copied over the selection's
    // output. (The selection and gather above still ran for them.)
    SparseAttention dense = sparse;
    dense.indexer = nullptr;
    const size_t headBytes = size_t{nHead / nHeadKv} * scoring.headDim * sizeof(float);
    const std::span<const uint32_t> heads = sparse.denseHeads;
    for (size_t i = 0, j; i < heads.size(); i = j) {
      for (j = i + 1; j < heads.size() && heads[j] == heads[j - 1] + 1;) ++j;
      const KvHeadRange run{heads[i], static_cast<uint32_t>(j - i)};
      rec.barrier();
      const std::vector<Pass> all = passes(layout, tailLayout ? &*tailLayout : nullptr, pages,
                                           layer, 1, pos0, nHead, sparse.window, tail, run);
      KVS_TRY(attendPasses(rec, all, q, query, ix.denseOut, 1, nHead, scratch, dense, tail));
      rec.copy(ix.denseOut, run.first * headBytes, target, run.first * headBytes,
               run.count * headBytes);
    }
  }
  if (!ix.shape.diagnostic) return okStatus();
  // Diagnostic: the softmax stats over every row and over the selection.
  rec.barrier();
  KVS_TRY(recordStats(rec, layout, pages, layer, query, pos0, nHead, 0, sparse.scale, ix.mass,
                      ix.massStride * (size_t{slot} * 2)));
  KVS_TRY(recordStats(rec, gathered, gatheredPage, 0, query, ix.gatherRows - 1, nHead, counts,
                      sparse.scale, ix.mass, ix.massStride * (size_t{slot} * 2 + 1)));
  return okStatus();
}

}  // namespace kvscope::gpu
