#include "gpu/attention_kernels.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "gpu/loop_limit.h"
#include "shaders/attention.h"

namespace kvscope::gpu {
namespace {

static_assert(AttentionKernels::kMaxPages == KVS_ATTENTION_MAX_PAGES,
              "page-array size shared with the shaders");

constexpr uint32_t kGpuWorkgroup = 64;  // kGpu attention; rows per tile
constexpr uint32_t kWriteWorkgroup = 64;
// kv_encode.comp: on CPU devices a workgroup per token, an invocation per KV
// head row; on GPUs a workgroup per row (its invocations share the row's work).
constexpr uint32_t kEncodeWorkgroup = 32;
constexpr uint32_t kGpuEncodeWorkgroup = 64;
constexpr uint32_t kRotateWorkgroup = 64;
constexpr uint32_t kReduceWorkgroup = 256;
constexpr uint32_t kGpuReduceOutputs = 32;   // attention_reduce.comp's OUTPUTS
constexpr uint32_t kGroupsPerCpuThread = 4;  // few large groups: see header
// Tasks that keep a GPU busy: enough workgroups per compute unit of a large
// GPU (an H200 has 132) that some always have loads in flight; with 512 a
// decode step's attention read its KV cache at ~4% of the device's bandwidth.
constexpr uint32_t kGpuTargetGroups = 2048;
// (token, query head) pairs one task serves from each K/V row it loads. The
// registers (and, for kGpu, shared memory) a task needs grow with them. kCpu
// also bounds pairs * (its words of a row): lavapipe's compile time grows
// faster than linearly with the registers (~1 s at 64, ~8 s at 256).
constexpr uint32_t kMaxPairs = 16;
// V words one attention.comp invocation loads together (its VALUE_WORDS): 16
// on GPUs; 4 where a CPU device runs the GPU shape (the tests), since
// lavapipe's compile time grows with it (a cold compile of the GPU-shape
// attention test: 65 s loading one row at a time, 78 s with 4 words, 191 s
// with 16).
constexpr uint32_t kGpuValueWords = 16;
constexpr uint32_t kCpuDeviceValueWords = 4;
constexpr uint32_t kCpuMaxPairWords = 64;
// Only decode-sized batches split the rows: the partial outputs grow with n.
constexpr uint32_t kSplitMaxTokens = 8;
constexpr uint32_t kMaxSplits = 256;
// Rows of a split are a multiple of this (of every shape's tile).
constexpr uint32_t kSplitAlign = 64;

// Words of a row's values an attention kernel keeps per query: f16 rows are
// read in words (value pairs), codec rows in groups of 8 values.
uint32_t queryWords(uint32_t headDim, bool codec) {
  return codec ? ceilDiv(headDim, 8) * 4 : ceilDiv(headDim, 2);
}

// Shared memory of attention.comp (kGpu) for `pairs` pairs (see its declarations).
size_t sharedBytes(uint32_t headDim, bool codec, uint32_t pairs) {
  const size_t words = queryWords(headDim, codec);
  return 4 * (size_t{pairs} * words * 2 + size_t{kGpuWorkgroup} * pairs * 3 + size_t{pairs} * 2);
}

// Words of a row one kCpu invocation owns.
uint32_t laneWords(uint32_t headDim, bool codec, uint32_t workgroup) {
  return codec ? ceilDiv(ceilDiv(headDim, 8), workgroup) * 4
               : ceilDiv(ceilDiv(headDim, 2), workgroup);
}

// Words attention_cpu.comp reads at once: the widest of 8, 4, 2, 1 dividing
// both an invocation's share of a row and the row stride.
uint32_t chunkWords(uint32_t headDim, uint32_t rowWords, uint32_t workgroup) {
  const uint32_t lane = laneWords(headDim, false, workgroup);
  uint32_t words = 8;
  while (lane % words != 0 || rowWords % words != 0) words /= 2;
  return words;
}

AttentionShape resolveShape(const Context& ctx, AttentionShape shape) {
  if (shape != AttentionShape::kAuto) return shape;
  const DeviceInfo& info = ctx.info();
  const bool cpuReady = info.shaderInt64 && info.subgroupArithmetic && info.subgroupSize > 0;
  return info.type == DeviceType::kCpu && cpuReady ? AttentionShape::kCpu : AttentionShape::kGpu;
}

struct KindDesc {
  const char* gpuShader;
  const char* cpuShader;
  uint32_t bindings;
  uint32_t pushBytes;
  bool paged;
};

bool isCodec(const KvStream& key, const KvStream& value) {
  return key.codec != KvCodec::kF16 || value.codec != KvCodec::kF16;
}

// Specialization constants 5 .. 134 of the codec shaders (shaders/kv_codec.glsl).
void addCodecConstants(std::vector<uint32_t>& spec, KvCodec key, KvCodec value,
                       std::span<const float> keyCodebook, std::span<const float> valueCodebook) {
  spec.resize(5, 0);
  spec.push_back(static_cast<uint32_t>(key));
  spec.push_back(static_cast<uint32_t>(value));
  for (std::span<const float> cb : {keyCodebook, valueCodebook}) {
    for (uint32_t i = 0; i < KVS_CODEBOOK_SIZE; ++i)
      spec.push_back(i < cb.size() ? std::bit_cast<uint32_t>(cb[i]) : 0u);
  }
}

// The first row the query at pos0 sees under a sliding window (0: none).
uint32_t windowStart(uint32_t pos0, uint32_t window) {
  return window != 0 && pos0 + 1 > window ? pos0 + 1 - window : 0;
}

// The push constants of an attention dispatch over `layer` of `layout`, the
// only one of its step (allSplits = its splits; the caller sets the fields
// of a pass that shares the stats with others).
push::AttentionPush attentionPush(const KvPageLayout& layout, uint32_t layer, uint32_t n,
                                  uint32_t pos0, uint32_t nHead, const AttentionPlan& p,
                                  uint32_t scoreStride, uint32_t rowCounts, float sparseV,
                                  float scale, uint32_t window = 0, bool sinks = false) {
  push::AttentionPush push{};
  push.n = n;
  push.pos0 = pos0;
  push.nHead = nHead;
  push.rowsPerPage = layout.pageRows(layer);
  push.keyRowWords = layout.rowBytes(layer, 0) / 4;
  push.valueRowWords = layout.rowBytes(layer, 1) / 4;
  push.keyOffset = static_cast<uint32_t>(layout.partOffset(layer, 0) / 4);
  push.valueOffset = static_cast<uint32_t>(layout.partOffset(layer, 1) / 4);
  push.tokenTiles = p.tokenTiles;
  push.splits = p.splits;
  push.splitRows = p.splitRows;
  push.allSplits = p.splits;
  push.scoreStride = scoreStride;
  push.rowCounts = rowCounts;
  push.scale = scale != 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(layout.headDim(layer)));
  push.sparseV = sparseV;
  push.window = window;
  push.rowStart = p.rowStart;
  push.sinks = sinks ? 1u : 0u;
  return push;
}

}  // namespace

const char* attentionShapeName(AttentionShape shape) {
  switch (shape) {
    case AttentionShape::kAuto:
      return "auto";
    case AttentionShape::kCpu:
      return "cpu";
    case AttentionShape::kGpu:
      return "gpu";
  }
  return "?";
}

KvPageLayout KvPageLayout::f16(std::vector<KvHeads> layers, uint32_t rowsPerPage) {
  const size_t streams = layers.size() * 2;
  return {std::move(layers), rowsPerPage, std::vector<KvStream>(streams)};
}

uint32_t KvPageLayout::widestKv() const {
  uint32_t widest = 0;
  for (const KvHeads& l : layers) widest = std::max(widest, l.nHeadKv * l.headDim);
  return widest;
}

uint32_t KvPageLayout::widestHead() const {
  uint32_t widest = 0;
  for (const KvHeads& l : layers) widest = std::max(widest, l.headDim);
  return widest;
}

size_t KvPageLayout::partOffset(uint32_t layer, uint32_t part) const {
  size_t offset = 0;
  for (uint32_t i = 0; i < layer * 2 + part; ++i)
    if (inRing(i / 2) == inRing(layer)) offset += partBytes(i / 2, i % 2);
  return offset;
}

size_t KvPageLayout::bytesOfPage(bool ringPage) const {
  size_t bytes = 0;
  for (uint32_t l = 0; l < nLayer(); ++l)
    if (inRing(l) == ringPage) bytes += partBytes(l, 0) + partBytes(l, 1);
  return bytes;
}

bool KvPageLayout::rotated() const {
  return std::any_of(streams.begin(), streams.end(),
                     [](const KvStream& s) { return kvCodecRotated(s.codec); });
}

KvPageLayout KvPageLayout::tailLayout() const {
  KvPageLayout view = f16(layers, rowsPerPage);
  view.ringRows = tailRows > 0 ? tailSlots : 0;
  view.ring = tail;
  return view;
}

AttentionKernels::AttentionKernels(Context& ctx, AttentionShape shape)
    : m_ctx(ctx), m_shape(resolveShape(ctx, shape)) {
  m_workgroup = m_shape == AttentionShape::kCpu ? ctx.info().subgroupSize : kGpuWorkgroup;
  if (ctx.info().type == DeviceType::kCpu)
    m_cpuThreads = std::max(1u, std::thread::hardware_concurrency());
  VkPhysicalDeviceFeatures features;
  vkGetPhysicalDeviceFeatures(ctx.physicalDevice(), &features);
  m_dynamicIndexing = features.shaderStorageBufferArrayDynamicIndexing;
}

Expected<const Pipeline*> AttentionKernels::pipeline(Kind kind, const Variant& v) {
  auto key = std::make_pair(kind, v);
  if (auto it = m_pipelines.find(key); it != m_pipelines.end()) return &it->second;
  static constexpr KindDesc kDescs[] = {
      {"kv_write", "kv_write", 2, sizeof(push::KvWritePush), true},
      {"attention_stats", "attention_stats_cpu", 3, sizeof(push::AttentionPush), true},
      {"attention_out", "attention_out_cpu", 5, sizeof(push::AttentionPush), true},
      {"attention_reduce_gpu", "attention_reduce", 2, sizeof(push::AttentionReducePush), false},
      {"kv_encode_gpu", "kv_encode", 2, sizeof(push::KvWritePush), true},
      {"kv_rotate_gpu", "kv_rotate", 3, sizeof(push::KvRotatePush), false},
      {"kv_rotate_gpu", "kv_rotate", 3, sizeof(push::KvRotatePush), false},
      {"kv_index", "kv_index", 1, sizeof(push::IndexerPush), true},
      {"index_score", "index_score", 3, sizeof(push::IndexerPush), false},
      {"index_select", "index_select", 2, sizeof(push::IndexerPush), false},
      {"kv_gather", "kv_gather", 2, sizeof(push::IndexerPush), true},
  };
  static constexpr KindDesc kCodecDescs[] = {
      {"attention_stats_codec", "attention_stats_codec_cpu", 3, sizeof(push::AttentionPush), true},
      {"attention_out_codec", "attention_out_codec_cpu", 5, sizeof(push::AttentionPush), true},
  };
  const bool codec = v.key != KvCodec::kF16 || v.value != KvCodec::kF16 || v.float32;
  const bool attention = kind == Kind::kStats || kind == Kind::kOut;
  const KindDesc& d = codec && attention ? kCodecDescs[kind == Kind::kStats ? 0 : 1]
                                         : kDescs[static_cast<int>(kind)];
  if (d.paged) {
    const uint32_t limit = m_ctx.limits().maxPerStageDescriptorStorageBuffers;
    if (d.bindings + kMaxPages > limit) {
      return makeError(ErrorCode::kUnsupported,
                       "the KV cache kernels bind {} storage buffers per shader; {} allows {}",
                       d.bindings + kMaxPages, m_ctx.info().name, limit);
    }
    if (!m_dynamicIndexing) {
      return makeError(ErrorCode::kUnsupported,
                       "{} cannot index arrays of storage buffers, which the KV cache kernels need",
                       m_ctx.info().name);
    }
  }
  const bool cpu = m_shape == AttentionShape::kCpu;
  PipelineDesc desc{cpu ? d.cpuShader : d.gpuShader, d.bindings, d.pushBytes, {}, "attention",
                    d.paged ? kMaxPages : 0};
  switch (kind) {
    case Kind::kKvWrite:
      desc.kernelClass = "kv_write";
      desc.specConstants = {kWriteWorkgroup};
      break;
    case Kind::kReduce:
      desc.specConstants = {kReduceWorkgroup};
      break;
    case Kind::kStats:
    case Kind::kOut:
      desc.specConstants = {m_workgroup, v.headDim, v.gqa, v.tokens};
      if (cpu) {
        desc.specConstants.push_back(v.chunkWords);
      } else {
        desc.specConstants.push_back(m_cpuThreads ? kCpuDeviceValueWords : kGpuValueWords);
      }
      if (codec)
        addCodecConstants(desc.specConstants, v.key, v.value, v.keyCodebook, v.valueCodebook);
      break;
    case Kind::kEncode:
    case Kind::kIndexWrite:  // both read or write rows of the codec in `key`
      desc.kernelClass = kind == Kind::kEncode ? "kv_write" : "index_write";
      desc.specConstants = {kind == Kind::kIndexWrite ? kIndexerWorkgroup
                            : cpu                     ? kEncodeWorkgroup
                                                      : kGpuEncodeWorkgroup,
                            v.headDim};
      if (kind == Kind::kIndexWrite) desc.specConstants.push_back(v.meanStd);
      addCodecConstants(desc.specConstants, v.key, v.value, v.keyCodebook, v.valueCodebook);
      break;
    case Kind::kRotate:
    case Kind::kRotateBack:
      desc.specConstants = {kRotateWorkgroup, v.headDim, kind == Kind::kRotateBack ? 1u : 0u};
      break;
    case Kind::kIndexScore:
      desc.kernelClass = "index_score";
      desc.specConstants = {kIndexerWorkgroup, v.headDim, v.gqa, v.meanStd};
      break;
    case Kind::kIndexSelect:
    case Kind::kGather:
      desc.kernelClass = kind == Kind::kGather ? "index_gather" : "index_select";
      desc.specConstants = {kIndexerWorkgroup};
      break;
  }
  KVS_ASSIGN_OR_RETURN(Pipeline p, Pipeline::create(m_ctx, desc));
  return &m_pipelines.emplace(std::move(key), std::move(p)).first->second;
}

uint32_t AttentionKernels::groupCap() const {
  return m_cpuThreads ? m_cpuThreads * kGroupsPerCpuThread
                      : m_ctx.limits().maxComputeWorkGroupCount[0];
}

// Query tokens per task: 1 for decode; for prefill as many as keep
// tokens * gqa pairs within the limits above (for kGpu, the shared memory
// within the device's), a power of two so that a model needs at most a
// handful of pipelines.
uint32_t AttentionKernels::tokensPerTask(uint32_t headDim, bool codec, uint32_t gqa,
                                         uint32_t n) const {
  const uint32_t wanted = std::bit_ceil(n);
  const uint32_t lane = laneWords(headDim, codec, m_workgroup);
  auto fits = [&](uint32_t pairs) {
    if (pairs > kMaxPairs) return false;
    if (m_shape == AttentionShape::kCpu) return pairs * lane <= kCpuMaxPairWords;
    return sharedBytes(headDim, codec, pairs) <= m_ctx.limits().maxComputeSharedMemorySize;
  };
  uint32_t tokens = 1;
  while (tokens < wanted && fits(tokens * 2 * gqa)) tokens *= 2;
  return tokens;
}

Status AttentionKernels::prepareDecode(const KvPageLayout& layout, uint32_t nHead) {
  const KvPageLayout tailLayout = layout.tailLayout();
  for (uint32_t layer = 0; layer < layout.nLayer(); ++layer) {
    std::vector<Variant> variants = {attentionVariant(layout, layer, nHead, 1)};
    if (layout.hasTail(layer))
      variants.push_back(attentionVariant(tailLayout, layer, nHead, 1, true));
    for (const Variant& variant : variants) {
      for (Kind kind : {Kind::kStats, Kind::kOut}) {
        KVS_ASSIGN_OR_RETURN(const Pipeline* built, pipeline(kind, variant));
        (void)built;
      }
    }
  }
  KVS_ASSIGN_OR_RETURN(const Pipeline* reduce, pipeline(Kind::kReduce, {}));
  (void)reduce;
  return okStatus();
}

AttentionPlan AttentionKernels::plan(const KvPageLayout& layout, uint32_t nHead, uint32_t n,
                                     uint32_t pos0, uint32_t layer, uint32_t window) const {
  return planRows(layout, nHead, n, layer, windowStart(pos0, window), pos0 + n, false);
}

AttentionPlan AttentionKernels::planRows(const KvPageLayout& layout, uint32_t nHead, uint32_t n,
                                         uint32_t layer, uint32_t rowBegin, uint32_t rowEnd,
                                         bool float32, uint32_t kvHeads) const {
  AttentionPlan p;
  if (n == 0 || layer >= layout.nLayer() || layout.nHeadKv(layer) == 0) return p;
  const uint32_t gqa = std::max(1u, nHead / layout.nHeadKv(layer));
  const uint32_t nHeadKv = kvHeads != 0 ? kvHeads : layout.nHeadKv(layer);
  const bool codec = float32 || isCodec(layout.stream(layer, 0), layout.stream(layer, 1));
  p.tokens = tokensPerTask(layout.headDim(layer), codec, gqa, n);
  p.tokenTiles = ceilDiv(n, p.tokens);
  p.rowStart = rowBegin;
  const uint32_t rows = std::max(rowEnd, rowBegin + 1) - rowBegin;
  const uint32_t tasks = nHeadKv * p.tokenTiles;
  const uint32_t target = m_cpuThreads ? m_cpuThreads * kGroupsPerCpuThread : kGpuTargetGroups;
  if (n <= kSplitMaxTokens && tasks < target)
    p.splits = std::min({ceilDiv(target, tasks), ceilDiv(rows, kSplitAlign), kMaxSplits});
  // Under a loop limit (lavapipe) a task loops over at most the rows its
  // budget allows, whatever the batch: a long prefill splits too.
  const uint32_t limit = m_ctx.info().loopIterationLimit;
  const uint64_t perRow = rowIterations(p.tokens * gqa, queryWords(layout.headDim(layer), codec));
  if (limit != 0) {
    const uint64_t budgetRows = loopBudget(limit) / perRow / kSplitAlign * kSplitAlign;
    p.splits =
        std::max(p.splits,
                 ceilDiv(rows, static_cast<uint32_t>(std::max<uint64_t>(budgetRows, kSplitAlign))));
  }
  // Rounding the rows per split up to whole tiles gives at most as many splits.
  p.splitBound = p.splits;
  p.splitRows = ceilDiv(ceilDiv(rows, p.splits), kSplitAlign) * kSplitAlign;
  p.splits = ceilDiv(rows, p.splitRows);
  p.tasks = tasks;
  p.pairs = p.tokens * gqa;
  p.rowLoop = perRow * p.splitRows;
  group(p, p.splits);
  return p;
}

void AttentionKernels::group(AttentionPlan& p, uint32_t allSplits) const {
  // A task also loops over the splits' statistics (2 per split and pair).
  const uint64_t perTask = p.rowLoop + 2 * uint64_t{allSplits} * p.pairs;
  p.groups = groupsWithinLoopLimit(
      uint64_t{p.tasks} * p.splits, perTask, std::min(p.tasks * p.splits, groupCap()),
      m_ctx.info().loopIterationLimit, m_ctx.limits().maxComputeWorkGroupCount[0]);
}

// Loop iterations a task of `pairs` (token, query head) pairs spends on one
// cached row, over both passes (an estimate from above, for the loop limit).
// kCpu walks the rows one at a time in each pass. kGpu takes a tile of WG
// rows per step: per tile, the score loop over the row's words, the pair
// loops, and per row batch the value loads (one per item) and, with sparse V,
// a scan of the batch's weights (pairs per row).
uint64_t AttentionKernels::rowIterations(uint32_t pairs, uint32_t words) const {
  if (m_shape == AttentionShape::kCpu) return 2;
  return 4 + pairs + ceilDiv(2 * (words + 2 * pairs), m_workgroup);
}

AttentionScratchBytes AttentionKernels::scratchBytes(const KvPageLayout& layout, uint32_t nHead,
                                                     uint32_t maxTokens, uint32_t maxRows) const {
  AttentionScratchBytes bytes;
  // Splits grow with the rows and only small batches split: try those sizes
  // (for every layer: a layer's codecs can change its tiles).
  for (uint32_t layer = 0; layer < layout.nLayer(); ++layer) {
    // Batches past kSplitMaxTokens split only under a loop limit, by the
    // rows alone: the largest batch takes the most.
    std::vector<uint32_t> sizes;
    for (uint32_t n = 1; n <= std::min(maxTokens, kSplitMaxTokens) && n <= maxRows; ++n)
      sizes.push_back(n);
    if (maxTokens > kSplitMaxTokens && maxTokens <= maxRows) sizes.push_back(maxTokens);
    for (uint32_t n : sizes) {
      // The bound of every row count up to maxRows (the codes older than a
      // tail and an indexed step's gathered rows are no more), and with a
      // precision tail its pass's.
      uint32_t splits = plan(layout, nHead, n, maxRows - n, layer).splitBound;
      if (layout.hasTail(layer)) {
        const uint32_t tailRows = std::min(layout.tailRows + n - 1, maxRows);
        splits += planRows(layout.tailLayout(), nHead, n, layer, 0, tailRows, true).splitBound;
      }
      if (splits == 1) continue;
      const size_t pairs = size_t{splits} * n * nHead;
      bytes.stats = std::max(bytes.stats, pairs * 2 * sizeof(float));
      bytes.partial = std::max(bytes.partial, pairs * layout.headDim(layer) * sizeof(float));
    }
  }
  if (m_shape == AttentionShape::kGpu) bytes.scores = size_t{nHead} * maxRows * sizeof(float);
  if (layout.rotated())
    bytes.rotated = size_t{maxTokens} * nHead * layout.widestHead() * sizeof(float);
  return bytes;
}

Expected<AttentionScratch> AttentionKernels::makeScratch(const KvPageLayout& layout, uint32_t nHead,
                                                         uint32_t maxTokens,
                                                         uint32_t maxRows) const {
  const AttentionScratchBytes bytes = scratchBytes(layout, nHead, maxTokens, maxRows);
  AttentionScratch scratch;
  for (auto [buffer, size] :
       {std::pair{&scratch.stats, bytes.stats}, std::pair{&scratch.partial, bytes.partial},
        std::pair{&scratch.scores, bytes.scores}, std::pair{&scratch.rotated[0], bytes.rotated},
        std::pair{&scratch.rotated[1], bytes.rotated}}) {
    if (size == 0) continue;
    KVS_ASSIGN_OR_RETURN(*buffer, Buffer::create(m_ctx, size));
  }
  return scratch;
}

Status AttentionKernels::checkPages(const KvPageLayout& layout,
                                    std::span<const Buffer* const> pages, uint32_t layer,
                                    uint32_t rows) const {
  if (layout.rowsPerPage == 0 || layout.streams.size() != size_t{layout.nLayer()} * 2 ||
      layer >= layout.nLayer() || layout.nHeadKv(layer) == 0 || layout.headDim(layer) == 0) {
    return makeError(ErrorCode::kInvalidArgument,
                     "bad KV page layout: {} layers, {} streams, {} rows per page, layer {}{}",
                     layout.nLayer(), layout.streams.size(), layout.rowsPerPage, layer,
                     layer < layout.nLayer()
                         ? fmt::format(" of {} KV heads of {} values", layout.nHeadKv(layer),
                                       layout.headDim(layer))
                         : std::string());
  }
  const uint32_t headDim = layout.headDim(layer);
  for (uint32_t part = 0; part < 2; ++part) {
    const KvStream& s = layout.stream(layer, part);
    const size_t rotationBytes = size_t{headDim} * headDim * sizeof(float);
    const uint32_t centroids = kvCodecHasCodebook(s.codec) ? 1u << kvCodecBits(s.codec) : 0u;
    if (kvCodecRotated(s.codec) &&
        (!s.rotation || s.rotation->size() < rotationBytes || s.codebook.size() != centroids)) {
      return makeError(ErrorCode::kInvalidArgument,
                       "KV codec {} of layer {} needs its {}x{} rotation and {} centroids",
                       kvCodecName(s.codec), layer, headDim, headDim, centroids);
    }
  }
  const size_t pageBytes = layout.inRing(layer) ? layout.ringPageBytes() : layout.pageBytes();
  const uint32_t pageRows = layout.pageRows(layer);
  if (pageBytes > m_ctx.limits().maxStorageBufferRange) {
    return makeError(ErrorCode::kUnsupported,
                     "a KV cache page of {} rows takes {} bytes; {} binds at most {} per buffer "
                     "(use a shorter context)",
                     pageRows, pageBytes, m_ctx.info().name, m_ctx.limits().maxStorageBufferRange);
  }
  // A ring is one page, whatever the row.
  const uint32_t needed = layout.inRing(layer) ? 1 : ceilDiv(rows, pageRows);
  if (needed > kMaxPages) {
    return makeError(ErrorCode::kInvalidArgument,
                     "{} cached rows need {} KV pages of {} rows; the kernels bind at most {}",
                     rows, needed, pageRows, kMaxPages);
  }
  if (pages.size() < needed || pages.size() > kMaxPages) {
    return makeError(ErrorCode::kInvalidArgument, "{} KV pages given for {} rows ({} needed)",
                     pages.size(), rows, needed);
  }
  for (const Buffer* page : pages) {
    if (!page || page->size() < pageBytes) {
      return makeError(ErrorCode::kInvalidArgument, "a KV page is smaller than its {} bytes",
                       pageBytes);
    }
  }
  return okStatus();
}

Status AttentionKernels::rotate(Recorder& rec, const KvStream& stream, uint32_t headDim,
                                const Buffer& in, const Buffer& out, uint32_t count, bool back) {
  const size_t bytes = size_t{count} * headDim * sizeof(float);
  if (in.size() < bytes || out.size() < bytes) {
    return makeError(ErrorCode::kInvalidArgument,
                     "rotating {} rows of {} values needs {}-byte buffers (see scratchBytes())",
                     count, headDim, bytes);
  }
  Variant v;
  v.headDim = headDim;
  KVS_ASSIGN_OR_RETURN(const Pipeline* p, pipeline(back ? Kind::kRotateBack : Kind::kRotate, v));
  // Invocations: for the fast transform (power-of-two rows) one per vector
  // on CPU devices, a workgroup per vector on GPUs; else one per 4 outputs
  // (or per output), as kv_rotate.comp splits them.
  const bool fast = std::has_single_bit(headDim);
  const bool perVector = fast && m_shape == AttentionShape::kGpu;
  const uint32_t groups =
      perVector ? count
                : ceilDiv(fast ? count : count * (headDim % 4 == 0 ? headDim / 4 : headDim),
                          kRotateWorkgroup);
  // Loop iterations per round of a workgroup: the fast transform's stages
  // over the vector (shared by a GPU workgroup's invocations), or a matrix
  // row per output.
  const uint32_t stages = std::bit_width(headDim);
  const uint64_t perRound = !fast       ? headDim + 8
                            : perVector ? stages * ceilDiv(headDim, kRotateWorkgroup) + 8
                                        : 2 * headDim + uint64_t{stages} * headDim / 2 + 8;
  rec.dispatch(*p, {in, *stream.rotation, out}, push::KvRotatePush{count},
               groupsWithinLoopLimit(groups, perRound, std::min(groups, groupCap()),
                                     m_ctx.info().loopIterationLimit,
                                     m_ctx.limits().maxComputeWorkGroupCount[0]));
  rec.traffic((2 * uint64_t{count} * headDim + uint64_t{headDim} * headDim) * sizeof(float),
              2 * uint64_t{count} * headDim * headDim);
  return okStatus();
}

Status AttentionKernels::writeKv(Recorder& rec, const KvPageLayout& layout,
                                 std::span<const Buffer* const> pages, uint32_t layer,
                                 const Buffer& k, const Buffer& v, uint32_t n, uint32_t pos0,
                                 const AttentionScratch& scratch, const IndexerBuffers* index,
                                 const KvTailRing& tail) {
  if (n == 0) return okStatus();
  KVS_TRY(checkPages(layout, pages, layer, pos0 + n));
  const uint32_t nHeadKv = layout.nHeadKv(layer), headDim = layout.headDim(layer);
  const size_t inputBytes = size_t{n} * nHeadKv * headDim * sizeof(float);
  if (k.size() < inputBytes || v.size() < inputBytes) {
    return makeError(ErrorCode::kInvalidArgument,
                     "writeKv of {} tokens needs {}-byte K and V buffers (got {} and {})", n,
                     inputBytes, k.size(), v.size());
  }
  push::KvWritePush push{n,
                         pos0,
                         nHeadKv,
                         headDim,
                         layout.pageRows(layer),
                         layout.rowBytes(layer, 0) / 4,
                         layout.rowBytes(layer, 1) / 4,
                         static_cast<uint32_t>(layout.partOffset(layer, 0) / 4),
                         static_cast<uint32_t>(layout.partOffset(layer, 1) / 4),
                         0};
  const bool codec = isCodec(layout.stream(layer, 0), layout.stream(layer, 1));
  if (!codec) {
    KVS_ASSIGN_OR_RETURN(const Pipeline* p, pipeline(Kind::kKvWrite, {}));
    rec.dispatchPaged(*p, {k, v}, pages, push, std::min(n, groupCap()));
    rec.traffic(2 * inputBytes +
                uint64_t{n} * nHeadKv * (layout.rowBytes(layer, 0) + layout.rowBytes(layer, 1)));
  }
  // Otherwise one encoder dispatch per part, each specialized for its codec;
  // a rotated codec first rotates the rows (y = R x) into the scratch.
  const Buffer* inCodecSpace[2] = {&k, &v};
  for (uint32_t part = 0; codec && part < 2; ++part) {
    const KvStream& s = layout.stream(layer, part);
    const Buffer& x = part == 0 ? k : v;
    const Buffer* rotated = &x;
    if (kvCodecRotated(s.codec)) {
      KVS_TRY(rotate(rec, s, headDim, x, scratch.rotated[part], n * nHeadKv, false));
      rec.barrier();
      rotated = &scratch.rotated[part];
    }
    inCodecSpace[part] = rotated;
    Variant variant;
    variant.headDim = headDim;
    variant.key = s.codec;
    variant.keyCodebook = s.codebook;
    KVS_ASSIGN_OR_RETURN(const Pipeline* p, pipeline(Kind::kEncode, variant));
    push.part = part;
    if (m_shape == AttentionShape::kCpu) {
      rec.dispatchPaged(*p, {x, *rotated}, pages, push, n);  // a workgroup per token
    } else {
      rec.dispatchPaged(*p, {x, *rotated}, pages, push, nHeadKv, n);  // one per row
    }
    rec.traffic(inputBytes * (rotated != &x ? 2 : 1) +
                uint64_t{n} * nHeadKv * layout.rowBytes(layer, part));
  }
  if (layout.hasTail(layer)) {
    // The same rows at f16 into the tail's ring, in the codecs' space: the
    // f16 writer over the tail's layout, its ring page bound in every slot.
    if (!tail.buffer)
      return makeError(ErrorCode::kInvalidArgument, "layer {} keeps a precision tail", layer);
    const KvPageLayout ring = layout.tailLayout();
    const std::span<const Buffer* const> ringPages(&tail.buffer, 1);
    KVS_TRY(checkPages(ring, ringPages, layer, pos0 + n));
    push::KvWritePush tailPush = push;
    tailPush.rowsPerPage = ring.pageRows(layer);
    tailPush.keyRowWords = ring.rowBytes(layer, 0) / 4;
    tailPush.valueRowWords = ring.rowBytes(layer, 1) / 4;
    tailPush.keyOffset = static_cast<uint32_t>(ring.partOffset(layer, 0) / 4);
    tailPush.valueOffset = static_cast<uint32_t>(ring.partOffset(layer, 1) / 4);
    tailPush.part = 0;
    KVS_ASSIGN_OR_RETURN(const Pipeline* p, pipeline(Kind::kKvWrite, {}));
    rec.dispatchPaged(*p, {*inCodecSpace[0], *inCodecSpace[1]}, ringPages, tailPush,
                      std::min(n, groupCap()));
    rec.traffic(2 * inputBytes + 2 * uint64_t{n} * nHeadKv * ring.rowBytes(layer, 0));
  }
  if (!index) return okStatus();
  rec.barrier();
  return indexRows(rec, layout, pages, *index, layer, pos0, pos0 + n);
}

AttentionKernels::Variant AttentionKernels::attentionVariant(const KvPageLayout& layout,
                                                             uint32_t layer, uint32_t nHead,
                                                             uint32_t tokens, bool float32) const {
  const KvStream& ks = layout.stream(layer, 0);
  const KvStream& vs = layout.stream(layer, 1);
  Variant variant;
  variant.headDim = layout.headDim(layer);
  variant.gqa = nHead / layout.nHeadKv(layer);
  variant.tokens = tokens;
  variant.float32 = float32;
  if (!isCodec(ks, vs) && !float32) {
    if (m_shape == AttentionShape::kCpu)
      variant.chunkWords = chunkWords(variant.headDim, layout.rowBytes(layer, 0) / 4, m_workgroup);
  } else {
    variant.key = ks.codec;
    variant.value = vs.codec;
    variant.keyCodebook = ks.codebook;
    variant.valueCodebook = vs.codebook;
  }
  return variant;
}

Status AttentionKernels::attend(Recorder& rec, const KvPageLayout& layout,
                                std::span<const Buffer* const> pages, uint32_t layer,
                                const Buffer& q, const Buffer& out, uint32_t n, uint32_t pos0,
                                uint32_t nHead, const AttentionScratch& scratch,
                                const SparseAttention& sparse, const KvTailRing& tail) {
  if (n == 0) return okStatus();
  KVS_TRY(checkPages(layout, pages, layer, pos0 + n));
  const uint32_t headDim = layout.headDim(layer);
  if (nHead == 0 || nHead % layout.nHeadKv(layer) != 0) {
    return makeError(ErrorCode::kInvalidArgument, "{} query heads cannot share {} KV heads evenly",
                     nHead, layout.nHeadKv(layer));
  }
  const size_t ioBytes = size_t{n} * nHead * headDim * sizeof(float);
  if (q.size() < ioBytes || out.size() < ioBytes) {
    return makeError(ErrorCode::kInvalidArgument,
                     "attention over {} tokens needs {}-byte q and out buffers (got {} and {})", n,
                     ioBytes, q.size(), out.size());
  }
  const KvStream& ks = layout.stream(layer, 0);
  const KvStream& vs = layout.stream(layer, 1);
  // Rotated codecs: queries into K's rotated space, output from V's.
  const Buffer* query = &q;
  const Buffer* target = &out;
  if (kvCodecRotated(ks.codec)) {
    KVS_TRY(rotate(rec, ks, headDim, q, scratch.rotated[0], n * nHead, false));
    rec.barrier();
    query = &scratch.rotated[0];
  }
  if (kvCodecRotated(vs.codec)) {
    if (scratch.rotated[1].size() < ioBytes) {
      return makeError(
          ErrorCode::kInvalidArgument,
          "attention over a rotated V codec needs scratch.rotated (see scratchBytes())");
    }
    target = &scratch.rotated[1];
  }
  if (layout.hasTail(layer) && !tail.buffer)
    return makeError(ErrorCode::kInvalidArgument, "layer {} keeps a precision tail", layer);
  if (sparse.indexer && n == 1) {
    KVS_TRY(attendSelected(rec, layout, pages, layer, q, *query, *target, pos0, nHead, scratch,
                           sparse, tail));
  } else {
    std::optional<KvPageLayout> tailLayout;
    if (layout.hasTail(layer)) tailLayout = layout.tailLayout();
    const std::vector<Pass> all = passes(layout, tailLayout ? &*tailLayout : nullptr, pages, layer,
                                         n, pos0, nHead, sparse.window, tail);
    KVS_TRY(attendPasses(rec, all, q, *query, *target, n, nHead, scratch, sparse, tail));
  }
  if (kvCodecRotated(vs.codec)) {
    rec.barrier();
    KVS_TRY(rotate(rec, vs, headDim, *target, out, n * nHead, true));
  }
  return okStatus();
}

// The shaders' tailStart (attention_common.glsl; kv::CachedRows::tailStart on
// the host side): the first row the query at p reads from the tail.
uint32_t AttentionKernels::tailStart(const KvPageLayout& layout, const KvTailRing& tail,
                                     uint32_t p) {
  return std::max(p + 1 - std::min(p + 1, layout.tailRows), tail.floor);
}

AttentionKernels::Pass AttentionKernels::tailPass(const KvPageLayout& layout,
                                                  const KvPageLayout& tailLayout, uint32_t layer,
                                                  uint32_t n, uint32_t pos0, uint32_t nHead,
                                                  uint32_t window, const KvTailRing& tail,
                                                  KvHeadRange heads) const {
  // Rows before the first query's tail are no query's.
  const uint32_t begin = std::max(windowStart(pos0, window), tailStart(layout, tail, pos0));
  Pass pass{&tailLayout,
            std::span<const Buffer* const>(&tail.buffer, 1),
            layer,
            pos0,
            planRows(tailLayout, nHead, n, layer, begin, pos0 + n, true, heads.count),
            2,
            layout.tailRows};
  pass.heads = heads;
  return pass;
}

std::vector<AttentionKernels::Pass> AttentionKernels::passes(
    const KvPageLayout& layout, const KvPageLayout* tailLayout,
    std::span<const Buffer* const> pages, uint32_t layer, uint32_t n, uint32_t pos0, uint32_t nHead,
    uint32_t window, const KvTailRing& tail, KvHeadRange heads) const {
  const uint32_t rowStart = windowStart(pos0, window);
  const uint32_t end = pos0 + n;
  if (!tailLayout) {
    Pass all{&layout, pages, layer, pos0,
             planRows(layout, nHead, n, layer, rowStart, end, false, heads.count)};
    all.heads = heads;
    return {all};
  }
  // Rows from the last query's tail on are every query's.
  std::vector<Pass> out;
  const uint32_t codesEnd = std::min(end, tailStart(layout, tail, end - 1));
  if (codesEnd > rowStart) {
    Pass codes{&layout,
               pages,
               layer,
               pos0,
               planRows(layout, nHead, n, layer, rowStart, codesEnd, false, heads.count),
               1,
               layout.tailRows};
    codes.heads = heads;
    out.push_back(codes);
  }
  out.push_back(tailPass(layout, *tailLayout, layer, n, pos0, nHead, window, tail, heads));
  return out;
}

Status AttentionKernels::attendPasses(Recorder& rec, std::span<const Pass> passes, const Buffer& q,
                                      const Buffer& query, const Buffer& target, uint32_t n,
                                      uint32_t nHead, const AttentionScratch& scratch,
                                      const SparseAttention& sparse, const KvTailRing& tail) {
  uint32_t splits = 0, rows = 0;
  for (const Pass& pass : passes) {
    splits += pass.plan.splits;
    rows = std::max(rows, pass.pos0 + n);
  }
  // attention_cpu.comp recomputes scores: cheaper there than reading them
  // back. The passes see disjoint rows of each query and store their scores
  // with one stride (`rows`), so they share the score buffer.
  const bool storeScores = m_shape == AttentionShape::kGpu &&
                           scratch.scores.size() >= size_t{n} * nHead * rows * sizeof(float);
  // Bindings a variant does not touch still need a valid buffer: q stands in.
  const Buffer& scores = storeScores ? scratch.scores : q;
  const BufferRange sinks = sparse.sinks ? *sparse.sinks : BufferRange(q);
  const uint32_t headDim = passes.front().layout->headDim(passes.front().layer);
  const size_t pairs = size_t{splits} * n * nHead;
  if (splits > 1 && (scratch.stats.size() < pairs * 2 * sizeof(float) ||
                     scratch.partial.size() < pairs * headDim * sizeof(float))) {
    return makeError(ErrorCode::kInvalidArgument,
                     "attention split {} ways needs scratch buffers (see scratchBytes())", splits);
  }
  // The query tokens' visible rows: 4 operations per (query head, row,
  // value) for the scores and the weighted sum (Recorder::traffic).
  const uint32_t pos0 = passes.front().pos0;
  uint64_t visible = uint64_t{n} * pos0 + uint64_t{n} * (n + 1) / 2;
  if (sparse.window != 0) {
    visible = 0;
    for (uint32_t t = 0; t < n; ++t) visible += std::min(pos0 + t + 1, sparse.window);
  }
  // The query heads of the passes' KV heads.
  const Pass& first = passes.front();
  const uint32_t queryHeads = first.heads.count != 0
                                  ? first.heads.count * (nHead / first.layout->nHeadKv(first.layer))
                                  : nHead;
  const uint64_t flops = 4 * visible * queryHeads * headDim;
  const uint64_t ioBytes = uint64_t{n} * queryHeads * headDim * sizeof(float);
  const uint64_t statsBytes = pairs * 2 * sizeof(float), partialBytes = pairs * headDim * 4;
  struct Recorded {
    const Pipeline* stats = nullptr;
    const Pipeline* out = nullptr;
    push::AttentionPush push;
    uint32_t groups = 1;
    uint64_t kBytes = 0, vBytes = 0, scoreBytes = 0;
  };
  std::vector<Recorded> recorded;
  uint32_t splitBase = 0;
  for (Pass pass : passes) {
    group(pass.plan, splits);  // its tasks merge every pass's splits
    const KvPageLayout& layout = *pass.layout;
    const uint32_t layer = pass.layer;
    const bool float32 = pass.tailSide == 2;
    const bool codec = float32 || isCodec(layout.stream(layer, 0), layout.stream(layer, 1));
    const Variant variant = attentionVariant(layout, layer, nHead, pass.plan.tokens, float32);
    if (m_shape == AttentionShape::kGpu &&
        sharedBytes(variant.headDim, codec, pass.plan.tokens * variant.gqa) >
            m_ctx.limits().maxComputeSharedMemorySize) {
      return makeError(ErrorCode::kUnsupported,
                       "attention with head_dim {} and {} query heads per KV head needs more "
                       "shared memory than {} has",
                       variant.headDim, variant.gqa, m_ctx.info().name);
    }
    Recorded r;
    r.groups = pass.plan.groups;
    KVS_ASSIGN_OR_RETURN(r.out, pipeline(Kind::kOut, variant));
    if (splits > 1) {
      KVS_ASSIGN_OR_RETURN(r.stats, pipeline(Kind::kStats, variant));
    }
    r.push = attentionPush(layout, layer, n, pass.pos0, nHead, pass.plan, storeScores ? rows : 0u,
                           pass.rowCounts, sparse.sparseV, sparse.scale, sparse.window,
                           sparse.sinks != nullptr);
    r.push.allSplits = splits;
    r.push.splitBase = splitBase;
    r.push.countTrim = pass.countTrim;
    r.push.tailRows = pass.tailRows;
    r.push.tailFloor = tail.floor;
    r.push.tailSide = pass.tailSide;
    r.push.kvHeadBase = pass.heads.first;
    r.push.kvHeads = pass.heads.count;
    splitBase += pass.plan.splits;
    // Roofline terms: every K and V row of the range once, scores kept in the
    // score buffer written and read back (else K read twice).
    const uint64_t read = pass.pos0 + n - std::min(pass.pos0 + n, pass.plan.rowStart);
    const uint32_t nHeadKv = pass.heads.count != 0 ? pass.heads.count : layout.nHeadKv(layer);
    r.kBytes = read * nHeadKv * layout.rowBytes(layer, 0);
    r.vBytes = read * nHeadKv * layout.rowBytes(layer, 1);
    r.scoreBytes = storeScores ? uint64_t{n} * nHead * read * sizeof(float) : r.kBytes;
    recorded.push_back(r);
  }
  if (splits == 1) {
    const Recorded& r = recorded.front();
    const Pass& pass = passes.front();
    rec.dispatchPaged(*r.out, {query, q, scores, target, sinks}, pass.pages, r.push, r.groups);
    rec.traffic(r.kBytes + r.vBytes + 2 * ioBytes + (storeScores ? 2 * r.scoreBytes : 0), flops);
    return okStatus();
  }
  // Passes write disjoint splits of the same buffers; a barrier between them
  // all the same (the validation layer tracks whole buffers).
  for (size_t i = 0; i < passes.size(); ++i) {
    const Recorded& r = recorded[i];
    if (i > 0) rec.barrier();
    rec.dispatchPaged(*r.stats, {query, scratch.stats, scores}, passes[i].pages, r.push, r.groups);
    rec.traffic(r.kBytes + ioBytes + (storeScores ? r.scoreBytes : 0) + statsBytes,
                i == 0 ? flops / 2 : 0);
  }
  rec.barrier();
  for (size_t i = 0; i < passes.size(); ++i) {
    const Recorded& r = recorded[i];
    if (i > 0) rec.barrier();
    rec.dispatchPaged(*r.out, {query, scratch.stats, scores, scratch.partial, sinks},
                      passes[i].pages, r.push, r.groups);
    rec.traffic(r.scoreBytes + r.vBytes + statsBytes + partialBytes, i == 0 ? flops / 2 : 0);
  }
  rec.barrier();
  KVS_ASSIGN_OR_RETURN(const Pipeline* reduce, pipeline(Kind::kReduce, {}));
  const auto count = static_cast<uint32_t>(size_t{n} * nHead * headDim);
  // attention_reduce_gpu: a workgroup per kGpuReduceOutputs outputs; on CPU devices an invocation
  // per output.
  // An output costs an invocation a loop over the splits (the GPU shape's
  // lanes share it, then sum their lanes).
  const uint32_t perGroup = m_shape == AttentionShape::kCpu ? kReduceWorkgroup : kGpuReduceOutputs;
  const uint32_t rounds = ceilDiv(count, perGroup);
  const uint64_t perRound =
      3 + splits + (m_shape == AttentionShape::kCpu ? 0 : kReduceWorkgroup / kGpuReduceOutputs);
  rec.dispatch(*reduce, {scratch.partial, target}, push::AttentionReducePush{count, splits},
               groupsWithinLoopLimit(rounds, perRound, std::min(rounds, groupCap()),
                                     m_ctx.info().loopIterationLimit,
                                     m_ctx.limits().maxComputeWorkGroupCount[0]));
  rec.traffic(partialBytes + ioBytes);
  return okStatus();
}

Status AttentionKernels::recordStats(Recorder& rec, const KvPageLayout& layout,
                                     std::span<const Buffer* const> pages, uint32_t layer,
                                     const Buffer& query, uint32_t pos0, uint32_t nHead,
                                     uint32_t rowCounts, float scale, const Buffer& mass,
                                     size_t offset) {
  const Variant variant = attentionVariant(layout, layer, nHead, 1);
  KVS_ASSIGN_OR_RETURN(const Pipeline* stats, pipeline(Kind::kStats, variant));
  // One task per KV head over all rows: one split, one token.
  const AttentionPlan whole{.splitRows = pos0 + 1};
  // The pass is one task per KV head: under a loop limit it cannot split.
  const uint32_t limit = m_ctx.info().loopIterationLimit;
  const uint64_t perRow = rowIterations(
      std::max(1u, nHead / layout.nHeadKv(layer)),
      queryWords(layout.headDim(layer), isCodec(layout.stream(layer, 0), layout.stream(layer, 1))));
  if (limit != 0 && uint64_t{pos0 + 1} * perRow / 2 > loopBudget(limit)) {
    return makeError(ErrorCode::kUnsupported,
                     "the captured-mass diagnostic reads {} rows in one pass, more than this "
                     "device runs in one shader invocation ({} loop iterations)",
                     pos0 + 1, limit);
  }
  const push::AttentionPush push =
      attentionPush(layout, layer, 1, pos0, nHead, whole, 0, rowCounts, 0.0f, scale);
  // One split: the pass writes (max, sum) of query head h at pair h of its output.
  const BufferRange out(mass, offset, size_t{nHead} * 2 * sizeof(float));
  rec.dispatchPaged(*stats, {query, out, query}, pages, push,
                    std::min(layout.nHeadKv(layer), groupCap()));
  rec.traffic(uint64_t{pos0 + 1} * layout.nHeadKv(layer) * layout.rowBytes(layer, 0),
              2 * uint64_t{pos0 + 1} * nHead * layout.headDim(layer));
  return okStatus();
}

}  // namespace kvscope::gpu
