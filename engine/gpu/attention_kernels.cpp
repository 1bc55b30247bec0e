#include "gpu/attention_kernels.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <thread>
#include <utility>

#include "shaders/attention.h"

namespace kvscope::gpu {
namespace {

static_assert(AttentionKernels::kMaxPages == KVS_ATTENTION_MAX_PAGES,
              "page-array size shared with the shaders");

constexpr uint32_t kGpuWorkgroup = 64;  // kGpu attention; rows per tile
constexpr uint32_t kWriteWorkgroup = 64;
constexpr uint32_t kReduceWorkgroup = 256;
constexpr uint32_t kGroupsPerCpuThread = 4;  // few large groups: see header
// Tasks that keep a GPU busy: a few workgroups per compute unit of a large GPU.
constexpr uint32_t kGpuTargetGroups = 512;
// (token, query head) pairs one task serves from each K/V row it loads. The
// registers (and, for kGpu, shared memory) a task needs grow with them. kCpu
// also bounds pairs * (its words of a row): lavapipe's compile time grows
// faster than linearly with the registers (~1 s at 64, ~8 s at 256).
constexpr uint32_t kMaxPairs = 16;
constexpr uint32_t kCpuMaxPairWords = 64;
// Only decode-sized batches split the rows: the partial outputs grow with n.
constexpr uint32_t kSplitMaxTokens = 8;
constexpr uint32_t kMaxSplits = 64;
// Rows of a split are a multiple of this (of every shape's tile).
constexpr uint32_t kSplitAlign = 64;

uint32_t ceilDiv(uint64_t a, uint64_t b) {
  return static_cast<uint32_t>((a + b - 1) / b);
}

// Shared memory of attention.comp (kGpu) for `pairs` pairs (see its declarations).
size_t sharedBytes(uint32_t headDim, uint32_t pairs) {
  const size_t words = (headDim + 1) / 2;
  return 4 * (size_t{pairs} * words * 2 + size_t{kGpuWorkgroup} * pairs * 3 + size_t{pairs} * 2);
}

// Words attention_cpu.comp reads at once: the widest of 8, 4, 2, 1 dividing
// both an invocation's share of a row and the row stride.
uint32_t chunkWords(uint32_t headDim, uint32_t rowWords, uint32_t workgroup) {
  const uint32_t laneWords = ((headDim + 1) / 2 + workgroup - 1) / workgroup;
  uint32_t words = 8;
  while (laneWords % words != 0 || rowWords % words != 0) words /= 2;
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

KvPageLayout KvPageLayout::f16(uint32_t nLayer, uint32_t nHeadKv, uint32_t headDim,
                               uint32_t rowsPerPage) {
  return {nLayer, nHeadKv, headDim, rowsPerPage, (headDim * 2 + 3) / 4 * 4};
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

Expected<const Pipeline*> AttentionKernels::pipeline(Kind kind, Variant v) {
  const auto key = std::make_tuple(kind, v.headDim, v.gqa, v.tokens, v.chunkWords);
  if (auto it = m_pipelines.find(key); it != m_pipelines.end()) return &it->second;
  static constexpr KindDesc kDescs[] = {
      {"kv_write", "kv_write", 2, sizeof(push::KvWritePush), true},
      {"attention_stats", "attention_stats_cpu", 3, sizeof(push::AttentionPush), true},
      {"attention_out", "attention_out_cpu", 4, sizeof(push::AttentionPush), true},
      {"attention_reduce", "attention_reduce", 2, sizeof(push::AttentionReducePush), false},
  };
  const KindDesc& d = kDescs[static_cast<int>(kind)];
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
      if (cpu) desc.specConstants.push_back(v.chunkWords);
      break;
  }
  KVS_ASSIGN_OR_RETURN(Pipeline p, Pipeline::create(m_ctx, desc));
  return &m_pipelines.emplace(key, std::move(p)).first->second;
}

uint32_t AttentionKernels::groupCap() const {
  return m_cpuThreads ? m_cpuThreads * kGroupsPerCpuThread
                      : m_ctx.limits().maxComputeWorkGroupCount[0];
}

// Query tokens per task: 1 for decode; for prefill as many as keep
// tokens * gqa pairs within the limits above (for kGpu, the shared memory
// within the device's), a power of two so that a model needs at most a
// handful of pipelines.
uint32_t AttentionKernels::tokensPerTask(uint32_t headDim, uint32_t gqa, uint32_t n) const {
  const uint32_t wanted = std::bit_ceil(n);
  const uint32_t laneWords = ((headDim + 1) / 2 + m_workgroup - 1) / m_workgroup;
  auto fits = [&](uint32_t pairs) {
    if (pairs > kMaxPairs) return false;
    if (m_shape == AttentionShape::kCpu) return pairs * laneWords <= kCpuMaxPairWords;
    return sharedBytes(headDim, pairs) <= m_ctx.limits().maxComputeSharedMemorySize;
  };
  uint32_t tokens = 1;
  while (tokens < wanted && fits(tokens * 2 * gqa)) tokens *= 2;
  return tokens;
}

AttentionPlan AttentionKernels::plan(const KvPageLayout& layout, uint32_t nHead, uint32_t n,
                                     uint32_t pos0) const {
  AttentionPlan p;
  if (layout.nHeadKv == 0 || n == 0) return p;
  const uint32_t gqa = std::max(1u, nHead / layout.nHeadKv);
  p.tokens = tokensPerTask(layout.headDim, gqa, n);
  p.tokenTiles = ceilDiv(n, p.tokens);
  const uint32_t rows = pos0 + n;
  const uint32_t tasks = layout.nHeadKv * p.tokenTiles;
  const uint32_t target = m_cpuThreads ? m_cpuThreads * kGroupsPerCpuThread : kGpuTargetGroups;
  if (n <= kSplitMaxTokens && tasks < target)
    p.splits = std::min({ceilDiv(target, tasks), ceilDiv(rows, kSplitAlign), kMaxSplits});
  p.splitRows = ceilDiv(ceilDiv(rows, p.splits), kSplitAlign) * kSplitAlign;
  p.splits = ceilDiv(rows, p.splitRows);
  p.groups = std::max(1u, std::min(tasks * p.splits, groupCap()));
  return p;
}

AttentionScratchBytes AttentionKernels::scratchBytes(const KvPageLayout& layout, uint32_t nHead,
                                                     uint32_t maxTokens, uint32_t maxRows) const {
  AttentionScratchBytes bytes;
  // Splits grow with the rows and only small batches split: try those sizes.
  for (uint32_t n = 1; n <= std::min(maxTokens, kSplitMaxTokens) && n <= maxRows; ++n) {
    const AttentionPlan p = plan(layout, nHead, n, maxRows - n);
    if (p.splits == 1) continue;
    const size_t pairs = size_t{p.splits} * n * nHead;
    bytes.stats = std::max(bytes.stats, pairs * 2 * sizeof(float));
    bytes.partial = std::max(bytes.partial, pairs * layout.headDim * sizeof(float));
  }
  if (m_shape == AttentionShape::kGpu) bytes.scores = size_t{nHead} * maxRows * sizeof(float);
  return bytes;
}

Expected<AttentionScratch> AttentionKernels::makeScratch(const KvPageLayout& layout, uint32_t nHead,
                                                         uint32_t maxTokens,
                                                         uint32_t maxRows) const {
  const AttentionScratchBytes bytes = scratchBytes(layout, nHead, maxTokens, maxRows);
  AttentionScratch scratch;
  for (auto [buffer, size] :
       {std::pair{&scratch.stats, bytes.stats}, std::pair{&scratch.partial, bytes.partial},
        std::pair{&scratch.scores, bytes.scores}}) {
    if (size == 0) continue;
    KVS_ASSIGN_OR_RETURN(*buffer, Buffer::create(m_ctx, size));
  }
  return scratch;
}

Status AttentionKernels::checkPages(const KvPageLayout& layout,
                                    std::span<const Buffer* const> pages, uint32_t layer,
                                    uint32_t rows) const {
  if (layout.nHeadKv == 0 || layout.headDim == 0 || layout.rowsPerPage == 0 ||
      layout.rowBytes % 4 != 0 || layout.rowBytes < layout.headDim * 2 || layer >= layout.nLayer) {
    return makeError(ErrorCode::kInvalidArgument,
                     "bad KV page layout: {} layers, {} KV heads, head_dim {}, {} rows per page, "
                     "{}-byte rows, layer {}",
                     layout.nLayer, layout.nHeadKv, layout.headDim, layout.rowsPerPage,
                     layout.rowBytes, layer);
  }
  if (layout.pageBytes() > m_ctx.limits().maxStorageBufferRange) {
    return makeError(ErrorCode::kUnsupported,
                     "a KV cache page of {} rows takes {} bytes; {} binds at most {} per buffer "
                     "(use fewer rows per page)",
                     layout.rowsPerPage, layout.pageBytes(), m_ctx.info().name,
                     m_ctx.limits().maxStorageBufferRange);
  }
  const uint32_t needed = ceilDiv(rows, layout.rowsPerPage);
  if (needed > kMaxPages) {
    return makeError(ErrorCode::kInvalidArgument,
                     "{} cached rows need {} KV pages of {} rows; the kernels bind at most {}",
                     rows, needed, layout.rowsPerPage, kMaxPages);
  }
  if (pages.size() < needed || pages.size() > kMaxPages) {
    return makeError(ErrorCode::kInvalidArgument, "{} KV pages given for {} rows ({} needed)",
                     pages.size(), rows, needed);
  }
  for (const Buffer* page : pages) {
    if (!page || page->size() < layout.pageBytes()) {
      return makeError(ErrorCode::kInvalidArgument, "a KV page is smaller than its {} bytes",
                       layout.pageBytes());
    }
  }
  return okStatus();
}

Status AttentionKernels::writeKv(Recorder& rec, const KvPageLayout& layout,
                                 std::span<const Buffer* const> pages, uint32_t layer,
                                 const Buffer& k, const Buffer& v, uint32_t n, uint32_t pos0) {
  if (n == 0) return okStatus();
  KVS_TRY(checkPages(layout, pages, layer, pos0 + n));
  const size_t inputBytes = size_t{n} * layout.nHeadKv * layout.headDim * sizeof(float);
  if (k.size() < inputBytes || v.size() < inputBytes) {
    return makeError(ErrorCode::kInvalidArgument,
                     "writeKv of {} tokens needs {}-byte K and V buffers (got {} and {})", n,
                     inputBytes, k.size(), v.size());
  }
  KVS_ASSIGN_OR_RETURN(const Pipeline* p, pipeline(Kind::kKvWrite, {0, 0, 0, 0}));
  const push::KvWritePush push{n,
                               pos0,
                               layout.nHeadKv,
                               layout.headDim,
                               layout.rowsPerPage,
                               layout.rowBytes / 4,
                               static_cast<uint32_t>(layout.partOffset(layer, 0) / 4),
                               static_cast<uint32_t>(layout.partOffset(layer, 1) / 4)};
  rec.dispatchPaged(*p, {k, v}, pages, push, std::min(n, groupCap()));
  return okStatus();
}

Status AttentionKernels::attend(Recorder& rec, const KvPageLayout& layout,
                                std::span<const Buffer* const> pages, uint32_t layer,
                                const Buffer& q, const Buffer& out, uint32_t n, uint32_t pos0,
                                uint32_t nHead, const AttentionScratch& scratch) {
  if (n == 0) return okStatus();
  KVS_TRY(checkPages(layout, pages, layer, pos0 + n));
  if (nHead == 0 || nHead % layout.nHeadKv != 0) {
    return makeError(ErrorCode::kInvalidArgument, "{} query heads cannot share {} KV heads evenly",
                     nHead, layout.nHeadKv);
  }
  const size_t ioBytes = size_t{n} * nHead * layout.headDim * sizeof(float);
  if (q.size() < ioBytes || out.size() < ioBytes) {
    return makeError(ErrorCode::kInvalidArgument,
                     "attention over {} tokens needs {}-byte q and out buffers (got {} and {})", n,
                     ioBytes, q.size(), out.size());
  }
  const AttentionPlan p = plan(layout, nHead, n, pos0);
  const uint32_t rowWords = layout.rowBytes / 4;
  const Variant variant{
      layout.headDim, nHead / layout.nHeadKv, p.tokens,
      m_shape == AttentionShape::kCpu ? chunkWords(layout.headDim, rowWords, m_workgroup) : 0};
  if (m_shape == AttentionShape::kGpu && sharedBytes(variant.headDim, p.tokens * variant.gqa) >
                                             m_ctx.limits().maxComputeSharedMemorySize) {
    return makeError(ErrorCode::kUnsupported,
                     "attention with head_dim {} and {} query heads per KV head needs more shared "
                     "memory than {} has",
                     variant.headDim, variant.gqa, m_ctx.info().name);
  }
  const uint32_t rows = pos0 + n;
  // attention_cpu.comp recomputes scores: cheaper there than reading them back.
  const bool storeScores = m_shape == AttentionShape::kGpu &&
                           scratch.scores.size() >= size_t{n} * nHead * rows * sizeof(float);
  const push::AttentionPush push{n,
                                 pos0,
                                 nHead,
                                 layout.rowsPerPage,
                                 rowWords,
                                 static_cast<uint32_t>(layout.partOffset(layer, 0) / 4),
                                 static_cast<uint32_t>(layout.partOffset(layer, 1) / 4),
                                 p.tokenTiles,
                                 p.splits,
                                 p.splitRows,
                                 storeScores ? rows : 0u,
                                 1.0f / std::sqrt(static_cast<float>(layout.headDim))};
  // Bindings a variant does not touch still need a valid buffer: q stands in.
  const Buffer& scores = storeScores ? scratch.scores : q;
  KVS_ASSIGN_OR_RETURN(const Pipeline* outPass, pipeline(Kind::kOut, variant));
  if (p.splits == 1) {
    rec.dispatchPaged(*outPass, {q, q, scores, out}, pages, push, p.groups);
    return okStatus();
  }
  const size_t pairs = size_t{p.splits} * n * nHead;
  if (scratch.stats.size() < pairs * 2 * sizeof(float) ||
      scratch.partial.size() < pairs * layout.headDim * sizeof(float)) {
    return makeError(ErrorCode::kInvalidArgument,
                     "attention split {} ways needs scratch buffers (see scratchBytes())",
                     p.splits);
  }
  KVS_ASSIGN_OR_RETURN(const Pipeline* statsPass, pipeline(Kind::kStats, variant));
  KVS_ASSIGN_OR_RETURN(const Pipeline* reduce, pipeline(Kind::kReduce, {0, 0, 0, 0}));
  rec.dispatchPaged(*statsPass, {q, scratch.stats, scores}, pages, push, p.groups);
  rec.barrier();
  rec.dispatchPaged(*outPass, {q, scratch.stats, scores, scratch.partial}, pages, push, p.groups);
  rec.barrier();
  const auto count = static_cast<uint32_t>(size_t{n} * nHead * layout.headDim);
  rec.dispatch(*reduce, {scratch.partial, out}, push::AttentionReducePush{count, p.splits},
               std::min(ceilDiv(count, kReduceWorkgroup), groupCap()));
  return okStatus();
}

}  // namespace kvscope::gpu
