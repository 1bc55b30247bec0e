#pragma once
// VulkanBackend: runs a model description (model/description.h) on a Vulkan
// device. The device and the weights are the model's VulkanModel, shared by
// every backend of the same model and device (vulkan_model.h); each backend
// has its own KV cache, in device pages that never move, and its own
// recorder; one forward() records the whole step (vulkan_step.h) and submits
// it, on a GPU in parts as it is recorded (VulkanBackendOptions::submitEvery). Agreement with
// CpuBackend is tested per op (tests/ops/test_ops.cpp) and per weight type
// (tests/backend/vulkan_parity_test.cpp).
//
// Codec error (kvErrors): the pages hold only encoded rows, so a forward() that
// covers a position p with p % errorStride == 0 also copies the K and V input
// rows of its last such token, every cache layer, to a host buffer, and the host
// round-trips them through the CPU schemes (the GPU codecs are byte-exact to
// them, tests/gpu/kv_codec_test.cpp). One token in errorStride is measured.

#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/codec_error.h"
#include "gpu/attention_kernels.h"
#include "gpu/buffer.h"
#include "gpu/context.h"
#include "gpu/kernels.h"
#include "gpu/recorder.h"
#include "gpu/weight_kernels.h"
#include "backend/vulkan_model.h"
#include "model/model_file.h"
#include "model/description.h"
#include "model/model_weights.h"

namespace kvscope::backend {

// A decode step of a 16-layer model is ~210 dispatches: a few parts, the
// first submitted after about two layers are recorded.
inline constexpr uint32_t kGpuSubmitEvery = 24;

struct VulkanBackendOptions {
  uint32_t contextLimit = 0;  // 0: the model's trained context
  int device = -1;            // -1: $KVSCOPE_DEVICE, then the best device
  bool validation = false;    // Khronos validation (tests)
  bool timing = true;         // per-kernel-class GPU time (throughput panel)
  // Of every this many steps one is timed: timestamps serialise a step (an
  // H200 decoded a 1B-shaped model at 397 tok/s timed, 505 untimed), so the
  // panel's breakdown is sampled; bench --kernels times every step.
  uint32_t timingEvery = 8;
  // Dispatches per queue submission within a step (gpu::RecorderOptions::
  // submitEvery); unset: kGpuSubmitEvery on a GPU, one submission on a CPU
  // device (lavapipe runs a submission on the cores that record the next).
  std::optional<uint32_t> submitEvery;
  // Tokens per step (backend.h's kMaxStepRows); larger batches are split. A
  // sliding-window layer's ring holds window - 1 + this many rows.
  uint32_t maxBatch = kMaxStepRows;
  // KV cache schemes per cache layer (ModelConfig::kvLayers(); empty: f16
  // everywhere), each stream built with kv::streamSeed(kvSeed, layer, part) as
  // kv::KvCache::create does.
  std::vector<kv::LayerSchemes> kvSchemes;
  uint64_t kvSeed = kv::kDefaultCacheSeed;
  // Two-phase caching, as on the CPU backend (CpuBackendOptions::twoPhase):
  // rows stay f16 through prefill; the first decode step (a one-token
  // forward on a non-empty cache) re-encodes every row into kvSchemes on the
  // device, and later rows are encoded as they are appended, until the cache
  // is emptied (trim(0)): the next prefill is f16 again.
  bool twoPhase = false;
  // The precision tail (kv/kv_cache.h): each query reads its last kvTail rows
  // at f16 (0: none), from a ring on the device (gpu/attention_kernels.h).
  uint32_t kvTail = 0;
  // Measure the codec error on the K/V rows of one position in this many
  // (0: never; kvErrors() is then empty). A probed step costs the host one
  // encode + decode per layer, KV head and part: ~6 ms for 32 layers x 8 heads
  // of d = 128 under k=q8_0,v=turbo3, so ~0.4 ms per token at 16.
  uint32_t errorStride = 16;
  // Indexed decode and sparse V (kv/indexer.h), as on the CPU backend: the
  // sidecar, page scores, selection, gather and sparse attention all run on
  // the device (gpu/attention_kernels.h, SparseAttention); prefill stays dense.
  kv::IndexerOptions indexer;
};

class VulkanBackend final : public Backend {
 public:
  static Expected<std::unique_ptr<VulkanBackend>> create(std::shared_ptr<const model::ModelFile> model,
                                                         const VulkanBackendOptions& options = {});
  ~VulkanBackend() override;
  // A backend over `shared`'s device and weights, with a cache of its own
  // (`options.device` and `validation` are shared's).
  static Expected<std::unique_ptr<VulkanBackend>> create(std::shared_ptr<VulkanModel> shared,
                                                         const VulkanBackendOptions& options = {});

  std::string_view name() const override { return "vulkan"; }
  const model::ModelConfig& config() const override { return m_shared->config(); }
  Status forward(const Batch& batch, Logits& out) override {
    return forwardWith(batch, out, model::runForward);
  }
  Status forwardWith(const Batch& batch, Logits& out, const Description& describe) override;
  uint32_t cachedTokens() const override { return m_held.rows(); }
  uint32_t contextLimit() const override { return m_contextLimit; }
  Status trim(uint32_t n) override;
  uint32_t trimFloor() const override { return m_held.trimFloor(); }
  Status setIndexer(const kv::IndexerOptions& options) override;
  kv::IndexerOptions indexer() const override { return m_indexer; }
  IndexerStep indexerStep() const override { return m_indexerStep; }

  const gpu::Context& context() const { return m_shared->context(); }
  const std::shared_ptr<VulkanModel>& shared() const { return m_shared; }
  // GPU time per kernel class of the last forward() (empty without timestamps).
  std::vector<KernelTiming> kernelTimings() const override;
  // Queue submissions the last step went out in (VulkanBackendOptions::submitEvery).
  uint32_t lastStepParts() const;
  uint64_t weightBytes() const { return m_shared->weightBytes(); }
  uint64_t kvBytesAllocated() const {
    return uint64_t{m_layout.pageBytes()} * m_pages.size() + (m_ring ? m_ring->size() : 0) +
           (m_tail ? m_tail->size() : 0);
  }
  std::vector<KvLayerBytes> kvBytes() const override;
  Expected<std::vector<float>> readKv(uint32_t layer, kv::KvPart part) const override;
  std::vector<KvLayerError> kvErrors() const override;
  const CodecErrorMeter* kvErrorMeter() const override { return &m_errors; }
  void setKvErrors(const CodecErrorMeter& measured) override { m_errors = measured; }
  const kv::KvLayout* kvLayout() const override { return &m_kvLayout; }
  ExpertUsage expertUsage() const override { return m_experts.usage(); }
  const ExpertLog* expertLog() const override { return &m_experts; }
  void setExpertLog(const ExpertLog& log) override { m_experts = log; }
  Status exportKv(const std::function<Status(std::span<const uint8_t>)>& write) const override;
  Status importKv(const kv::KvLayout& layout, uint32_t rows,
                  const std::function<Status(std::span<uint8_t>)>& read) override;
  uint32_t kvTailHeld() const override { return m_tail ? m_held.tailHeld() : 0; }
  uint64_t kvTailBytes(uint32_t rows, uint32_t held) const override {
    return m_kvLayout.savedTailBytes(rows, held);
  }
  Status exportKvTail(const std::function<Status(std::span<const uint8_t>)>& write) const override;
  Status importKvTail(uint32_t held,
                      const std::function<Status(std::span<uint8_t>)>& read) override;

 private:
  friend class VulkanStep;
  // The buffers of batches of up to `capacity` tokens besides the
  // description's slots, shapes per token.
  struct Activations {
    uint32_t capacity = 0;
    // [n, dims / 2] (cos, sin) per RoPE spec of a step, host-visible.
    std::vector<gpu::Buffer> ropeTables;
    gpu::Buffer logits;     // [n, nVocab], host-visible
    gpu::AttentionScratch scratch;
    // A model with experts: [nLayer][n, nUsed] uint32 for a step of n tokens
    // (room for n = capacity), host-visible: each layer's picks, copied from
    // the router's output for the ExpertLog.
    gpu::Buffer expertIds;
  };
  // The description's activation buffers by slot name, [capacity][width] each.
  struct Slots {
    std::vector<std::string> names;
    std::vector<gpu::Buffer> buffers;
    std::vector<uint32_t> widths;
    // Buffers a slot outgrew during the step being recorded (VulkanStep::act),
    // released before the next.
    std::vector<gpu::Buffer> retired;
  };

  VulkanBackend() = default;
  // The layout of m_options.kvSchemes (f16 where empty) and its device view.
  Status createKvLayout(uint32_t rowsPerPage);
  // Two-phase: a backend of the same options and this one's indexer whose
  // cache holds `schemes` (empty: f16), no rows yet.
  Expected<std::unique_ptr<VulkanBackend>> backendFor(
      const std::vector<kv::LayerSchemes>& schemes) const;
  // Two-phase, at the first decode step: every cached row read back as floats
  // and encoded again with the pending schemes by writeKv, the codec error
  // measured anew on them, then this backend adopts that cache.
  Status compressRows();
  // Takes `next`'s KV cache: its layouts, pages, rings, rows held, the
  // scratch and indexer buffers made for them; `next` gets this one's.
  void adoptCache(VulkanBackend& next);
  Status ensureActivations(uint32_t n);
  Status ensurePages(uint32_t rows);
  size_t pagesHolding(uint32_t layer, uint32_t rows) const;
  // The pages `layer`'s kernels bind: the growing pages, or the ring alone.
  std::span<const gpu::Buffer* const> pagesOf(uint32_t layer) const;
  // The precision tail as the kernels take it, for the step being recorded.
  gpu::KvTailRing tailRing() const { return {m_tail ? &*m_tail : nullptr, m_held.tailFirst()}; }
  Status forwardChunk(std::span<const int32_t> tokens, bool allLogits, Logits& out, uint32_t row0,
                      const Description& describe, bool lastChunk);
  // m_indexerStep from the device's lists (and mass) of the step just run.
  void readIndexerStep(uint32_t rows, bool selected);
  void measureProbe();
  // Rebuilds `index`'s sidecar entries of every indexed layer from the first `rows`
  // cached rows, in one step.
  Status rebuildSidecar(const gpu::IndexerBuffers& index, uint32_t rows);

  // Declared first, destroyed last: the device every buffer below lives on.
  std::shared_ptr<VulkanModel> m_shared;
  std::unique_ptr<gpu::Recorder> m_rec;  // this backend's command buffer
  VulkanBackendOptions m_options;

  model::ForwardPlan m_plan;  // at this backend's context limit
  std::unique_ptr<Activations> m_act;
  Slots m_slots;
  kv::KvLayout m_kvLayout;    // the pages' layout: schemes, seeds, offsets, accounting
  gpu::KvPageLayout m_layout;  // its device view: codecs and rotations
  std::vector<gpu::Buffer> m_rotations;  // R of rotated streams (m_layout points into it)
  std::vector<gpu::Buffer> m_pages;
  std::vector<const gpu::Buffer*> m_pagePtrs;
  std::optional<gpu::Buffer> m_ring;  // the window layers' ring page, from the first row
  const gpu::Buffer* m_ringPtr = nullptr;
  std::optional<gpu::Buffer> m_tail;  // the precision tail's ring, from the first row
  kv::CachedRows m_held;
  uint32_t m_contextLimit = 0;
  // Two-phase: the schemes the first decode step moves the rows to (empty
  // when two-phase is off), and those it has yet to move to (empty once it
  // has; trim(0) empties the cache into f16 pages again).
  std::vector<kv::LayerSchemes> m_twoPhase, m_pendingSchemes;

  CodecErrorMeter m_errors;
  gpu::Buffer m_probe;      // [cache layer][K, V][m_layout.widestKv()] floats, host-visible
  int64_t m_probeRow = -1;  // the token of this step copied to m_probe (-1: none)

  kv::IndexerOptions m_indexer;
  kv::IndexerOptions m_selection;                   // kv::selectionOptions(m_indexer, the tail)
  std::vector<std::vector<uint32_t>> m_denseHeads;  // [cache layer]: m_indexer.denseHeads' KV heads
  std::unique_ptr<gpu::IndexerBuffers> m_index;  // while m_indexer.enabled()
  bool m_selectStep = false;  // the step being recorded attends the selected rows
  IndexerStep m_indexerStep;
  ExpertLog m_experts;  // a model with experts: each cached row's picks
};

}  // namespace kvscope::backend
