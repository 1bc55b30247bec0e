#pragma once
// The attention side of the Vulkan forward pass over an f16 KV cache kept in
// pages on the device, with the numerics of CpuBackend::attention (queries
// and normalized softmax weights rounded to f16; see shaders/attention.comp).
//
// Layout contract (identical to the host kv::KvCache): the cache is a list of
// pages, each its own Buffer; page p holds rows [p*R, (p+1)*R) of every
// stream as [layer][part K=0, V=1][KV head][R rows][rowBytes]. Pages never
// move; growing the cache adds a page. A kernel binds at most kMaxPages pages,
// so one layer's context is at most kMaxPages * R rows, and a page must fit in
// maxStorageBufferRange (pages are bound whole).
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
// the query tokens and does not split. On CPU devices a few workgroups loop
// over the tasks (lavapipe pays ~3 us per group). See AttentionShape for how
// a task maps to invocations.

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <tuple>

#include "gpu/buffer.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"

namespace kvscope::gpu {

struct KvPageLayout {
  uint32_t nLayer = 0;
  uint32_t nHeadKv = 0;
  uint32_t headDim = 0;
  uint32_t rowsPerPage = 0;  // R
  uint32_t rowBytes = 0;     // bytes of one stored row, a multiple of 4

  // The f16 layout: rowBytes = headDim * 2 padded to a multiple of 4 (kv::F16Scheme).
  static KvPageLayout f16(uint32_t nLayer, uint32_t nHeadKv, uint32_t headDim,
                          uint32_t rowsPerPage);
  // Bytes of one (layer, part) block of a page: [nHeadKv][R][rowBytes].
  size_t partBytes() const { return size_t{nHeadKv} * rowsPerPage * rowBytes; }
  size_t partOffset(uint32_t layer, uint32_t part) const {
    return (size_t{layer} * 2 + part) * partBytes();
  }
  size_t pageBytes() const { return size_t{nLayer} * 2 * partBytes(); }
  // Byte offset of cache row `row` of (layer, part, head) inside page row / R.
  size_t rowOffset(uint32_t layer, uint32_t part, uint32_t head, uint32_t row) const {
    return partOffset(layer, part) + (size_t{head} * rowsPerPage + row % rowsPerPage) * rowBytes;
  }
};

// Scratch sizes in bytes; 0 means the buffer is never read.
struct AttentionScratchBytes {
  size_t stats = 0;
  size_t partial = 0;
  size_t scores = 0;
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
};

class AttentionKernels {
 public:
  // Page-array slots of every attention kernel (shaders/attention.h): with
  // the kernels' other bindings, within the 32 storage buffers per shader
  // stage that lavapipe allows (checked against the device when a pipeline
  // is created).
  static constexpr uint32_t kMaxPages = 16;

  explicit AttentionKernels(Context& ctx, AttentionShape shape = AttentionShape::kAuto);

  // The launch shape this instance uses (kAuto resolved).
  AttentionShape shape() const { return m_shape; }

  AttentionPlan plan(const KvPageLayout& layout, uint32_t nHead, uint32_t n, uint32_t pos0) const;
  // Scratch large enough for every attend() with n <= maxTokens and
  // pos0 + n <= maxRows; `scores` is sized for decode (n = 1), kGpu only.
  AttentionScratchBytes scratchBytes(const KvPageLayout& layout, uint32_t nHead, uint32_t maxTokens,
                                     uint32_t maxRows) const;
  // Device buffers of scratchBytes(); kOutOfMemory when they do not fit.
  Expected<AttentionScratch> makeScratch(const KvPageLayout& layout, uint32_t nHead,
                                         uint32_t maxTokens, uint32_t maxRows) const;

  // Encodes k and v (float32 [n][nHeadKv * headDim] each, RoPE applied) to f16,
  // round to nearest even, and stores them as rows pos0 .. pos0 + n - 1 of
  // `layer`. pages must cover those rows. One dispatch.
  Status writeKv(Recorder& rec, const KvPageLayout& layout, std::span<const Buffer* const> pages,
                 uint32_t layer, const Buffer& k, const Buffer& v, uint32_t n, uint32_t pos0);

  // out[n][nHead * headDim] = causal attention of q[n][nHead * headDim]
  // (queries at positions pos0 .. pos0 + n - 1, RoPE applied) over rows
  // [0, pos0 + t] of `layer` for token t. Query head h reads KV head
  // h / (nHead / nHeadKv). One dispatch, or three (stats, partial outputs,
  // reduction) when the plan splits the rows; then scratch.stats and
  // scratch.partial must hold scratchBytes() for n and pos0 + n
  // (kInvalidArgument otherwise).
  Status attend(Recorder& rec, const KvPageLayout& layout, std::span<const Buffer* const> pages,
                uint32_t layer, const Buffer& q, const Buffer& out, uint32_t n, uint32_t pos0,
                uint32_t nHead, const AttentionScratch& scratch = {});

 private:
  enum class Kind { kKvWrite, kStats, kOut, kReduce };
  struct Variant {
    uint32_t headDim, gqa, tokens, chunkWords;
  };
  Expected<const Pipeline*> pipeline(Kind kind, Variant v);
  Status checkPages(const KvPageLayout& layout, std::span<const Buffer* const> pages,
                    uint32_t layer, uint32_t rows) const;
  uint32_t tokensPerTask(uint32_t headDim, uint32_t gqa, uint32_t n) const;
  uint32_t groupCap() const;

  Context& m_ctx;
  AttentionShape m_shape;
  uint32_t m_workgroup = 0;   // invocations of an attention workgroup = rows per tile
  uint32_t m_cpuThreads = 0;  // >0 on CPU devices: the device's worker threads
  bool m_dynamicIndexing = false;
  std::map<std::tuple<Kind, uint32_t, uint32_t, uint32_t, uint32_t>, Pipeline> m_pipelines;
};

}  // namespace kvscope::gpu
