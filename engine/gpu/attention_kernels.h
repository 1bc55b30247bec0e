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
//
// Codecs: writeKv encodes new rows with each stream's codec on the device
// (shaders/kv_encode.comp, the kv scheme's bytes); attend reads the codes
// where it reads a row (shaders/kv_codec.glsl decodes groups of 8 values),
// never a dequantized copy of the cache. For a rotated K codec the queries
// are rotated once (q' = R_k q, shaders/kv_rotate.comp) and scored against
// gamma * codebook values; for a rotated V codec the weighted sum stays in
// V's rotated space and the output is rotated back once (R_v^T).
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
#include <utility>

#include <vector>

#include "gpu/buffer.h"
#include "gpu/kv_codec.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"

namespace kvscope::gpu {

struct KvPageLayout {
  uint32_t nLayer = 0;
  uint32_t nHeadKv = 0;
  uint32_t headDim = 0;
  uint32_t rowsPerPage = 0;       // R
  std::vector<KvStream> streams;  // [layer * 2 + part]: each stream's codec

  // Every stream f16 (kv::F16Scheme).
  static KvPageLayout f16(uint32_t nLayer, uint32_t nHeadKv, uint32_t headDim,
                          uint32_t rowsPerPage);
  const KvStream& stream(uint32_t layer, uint32_t part) const {
    return streams[size_t{layer} * 2 + part];
  }
  // Bytes of one stored row of (layer, part), a multiple of 4.
  uint32_t rowBytes(uint32_t layer, uint32_t part) const {
    return kvCodecRowBytes(stream(layer, part).codec, headDim);
  }
  // Bytes of one (layer, part) block of a page: [nHeadKv][R][rowBytes].
  size_t partBytes(uint32_t layer, uint32_t part) const {
    return size_t{nHeadKv} * rowsPerPage * rowBytes(layer, part);
  }
  // Where the (layer, part) block starts in a page: after every earlier block.
  size_t partOffset(uint32_t layer, uint32_t part) const;
  size_t pageBytes() const { return partOffset(nLayer, 0); }
  // Byte offset of cache row `row` of (layer, part, head) inside page row / R.
  size_t rowOffset(uint32_t layer, uint32_t part, uint32_t head, uint32_t row) const {
    return partOffset(layer, part) +
           (size_t{head} * rowsPerPage + row % rowsPerPage) * rowBytes(layer, part);
  }
  // Whether some stream uses a rotated codec (attend and writeKv then need
  // AttentionScratch::rotated).
  bool rotated() const;
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

  // The plan of attend() for `layer` (its codecs decide the tile sizes).
  AttentionPlan plan(const KvPageLayout& layout, uint32_t nHead, uint32_t n, uint32_t pos0,
                     uint32_t layer = 0) const;
  // Scratch large enough for every attend() with n <= maxTokens and
  // pos0 + n <= maxRows; `scores` is sized for decode (n = 1), kGpu only.
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
  Status writeKv(Recorder& rec, const KvPageLayout& layout, std::span<const Buffer* const> pages,
                 uint32_t layer, const Buffer& k, const Buffer& v, uint32_t n, uint32_t pos0,
                 const AttentionScratch& scratch = {});

  // out[n][nHead * headDim] = causal attention of q[n][nHead * headDim]
  // (queries at positions pos0 .. pos0 + n - 1, RoPE applied) over rows
  // [0, pos0 + t] of `layer` for token t. Query head h reads KV head
  // h / (nHead / nHeadKv). One dispatch, or three (stats, partial outputs,
  // reduction) when the plan splits the rows; then scratch.stats and
  // scratch.partial must hold scratchBytes() for n and pos0 + n
  // (kInvalidArgument otherwise). A rotated K codec adds a rotation of q
  // before, a rotated V codec one of the output after (scratch.rotated).
  Status attend(Recorder& rec, const KvPageLayout& layout, std::span<const Buffer* const> pages,
                uint32_t layer, const Buffer& q, const Buffer& out, uint32_t n, uint32_t pos0,
                uint32_t nHead, const AttentionScratch& scratch = {});

 private:
  enum class Kind { kKvWrite, kStats, kOut, kReduce, kEncode, kRotate, kRotateBack };
  // What selects a pipeline besides its kind (fields a kind ignores stay empty).
  struct Variant {
    uint32_t headDim = 0, gqa = 0, tokens = 0, chunkWords = 0;
    KvCodec key = KvCodec::kF16, value = KvCodec::kF16;
    std::vector<float> keyCodebook, valueCodebook;
    auto operator<=>(const Variant&) const = default;
  };
  Expected<const Pipeline*> pipeline(Kind kind, const Variant& v);
  Status checkPages(const KvPageLayout& layout, std::span<const Buffer* const> pages,
                    uint32_t layer, uint32_t rows) const;
  // Records out = R in (back: R^T in) for `count` vectors of headDim floats.
  Status rotate(Recorder& rec, const KvStream& stream, uint32_t headDim, const Buffer& in,
                const Buffer& out, uint32_t count, bool back);
  uint32_t tokensPerTask(uint32_t headDim, bool codec, uint32_t gqa, uint32_t n) const;
  uint32_t groupCap() const;

  Context& m_ctx;
  AttentionShape m_shape;
  uint32_t m_workgroup = 0;   // invocations of an attention workgroup = rows per tile
  uint32_t m_cpuThreads = 0;  // >0 on CPU devices: the device's worker threads
  bool m_dynamicIndexing = false;
  std::map<std::pair<Kind, Variant>, Pipeline> m_pipelines;
};

}  // namespace kvscope::gpu
