#pragma once
// CpuBackend: runs a model description (model/description.h) on the CPU, op
// by op (cpu_step.h), multithreaded over output rows and over KV heads and
// positions.
// Weights stay in their GGUF types in the mapped file and are decoded inside
// the products (cpu_matmul.h); the KV cache is a host KvCache, attended on its
// codes (cpu_attention.h). With the default kExact products this is the
// oracle every Vulkan kernel and the VulkanBackend are tested against; the
// app and CLI run it with int8 activations (runtime/backend_factory.h).

#include <memory>
#include <unordered_map>

#include "backend/backend.h"
#include "backend/codec_error.h"
#include "backend/cpu_matmul.h"
#include "core/thread_pool.h"
#include "kv/kv_cache.h"
#include "model/model_file.h"
#include "model/description.h"
#include "model/model_weights.h"

namespace kvscope::backend {

struct CpuBackendOptions {
  uint32_t contextLimit = 0;  // 0: the model's trained context
  unsigned threads = 0;       // 0: one per hardware thread
  // KV cache schemes per layer (empty: f16 everywhere), each stream built
  // with kv::streamSeed(kvSeed, layer, part) (kv::KvCache::create).
  std::vector<kv::LayerSchemes> kvSchemes;
  uint64_t kvSeed = kv::kDefaultCacheSeed;
  // Two-phase caching: rows stay f16 through prefill; the first decode step
  // (a one-token forward on a non-empty cache) re-encodes every row into
  // kvSchemes, and later rows are encoded as they are appended, until the
  // cache is emptied (trim(0)): the next prefill is f16 again.
  bool twoPhase = false;
  // The precision tail (kv/kv_cache.h): each query reads its last kvTail rows
  // at f16 (0: none).
  uint32_t kvTail = 0;
  // kExact keeps every product in float32 (the reference); kInt8Activations
  // rounds activations to int8 for quantized weights like llama.cpp's CPU
  // path: ~35% faster decode, but logits move by up to ~2e-2 of their spread
  // (cpu_matmul.h), so it must not serve as a reference. It also scores q8_0
  // keys against int8-rounded queries (cpu_attention.h), as llama.cpp does.
  cpu::MatmulPrecision matmul = cpu::MatmulPrecision::kExact;
  // Measure the codec error (kvErrors) on the K/V rows of the positions p with
  // p % errorStride == 0 (0: never). Decoding every stored row again to meter
  // it cost as much as the encode itself; one position in 16 measures the same
  // error to a few percent, as the Vulkan backend samples it.
  uint32_t errorStride = 16;
  // Rows one step appends at most (backend.h's kMaxStepRows): a longer batch
  // runs as several steps, and a sliding-window layer's ring holds window - 1
  // + this many rows. Tests make it small to wrap the ring in a few tokens.
  uint32_t stepRows = kMaxStepRows;
  // Indexed decode and sparse V (kv/indexer.h): with the indexer on, the
  // cache keeps its sidecar, and each decode step attends, per layer and KV
  // head, the rows kv::selectRows picks (cpu_indexer.h); prefill stays dense.
  kv::IndexerOptions indexer;
};

class CpuBackend final : public Backend {
 public:
  // Binds the model's weights and checks the CPU kernels decode every type,
  // as create() does before it allocates anything.
  static Status checkRuns(const model::ModelFile& model);
  static Expected<std::unique_ptr<CpuBackend>> create(std::shared_ptr<const model::ModelFile> model,
                                                      const CpuBackendOptions& options = {});

  std::string_view name() const override { return "cpu"; }
  const model::ModelConfig& config() const override { return m_model->config(); }
  Status forward(const Batch& batch, Logits& out) override {
    return forwardWith(batch, out, model::runForward);
  }
  Status forwardWith(const Batch& batch, Logits& out, const Description& describe) override;
  uint32_t cachedTokens() const override { return m_cache->rows(); }
  uint32_t contextLimit() const override { return m_contextLimit; }
  Status trim(uint32_t n) override;
  uint32_t trimFloor() const override { return m_cache->trimFloor(); }
  const kv::KvCache& cache() const { return *m_cache; }
  std::vector<KvLayerBytes> kvBytes() const override;
  Expected<std::vector<float>> readKv(uint32_t layer, kv::KvPart part) const override;
  std::vector<KvLayerError> kvErrors() const override;
  const CodecErrorMeter* kvErrorMeter() const override { return &m_errors; }
  void setKvErrors(const CodecErrorMeter& measured) override { m_errors = measured; }
  const kv::KvLayout* kvLayout() const override { return &m_cache->layout(); }
  Status exportKv(const std::function<Status(std::span<const uint8_t>)>& write) const override;
  Status importKv(const kv::KvLayout& layout, uint32_t rows,
                  const std::function<Status(std::span<uint8_t>)>& read) override;
  uint32_t kvTailHeld() const override { return m_cache->tailHeld(); }
  uint64_t kvTailBytes(uint32_t rows, uint32_t held) const override {
    return m_cache->tailBytes(rows, held);
  }
  Status exportKvTail(const std::function<Status(std::span<const uint8_t>)>& write) const override {
    return m_cache->exportTail(write);
  }
  Status importKvTail(uint32_t held,
                      const std::function<Status(std::span<uint8_t>)>& read) override {
    return m_cache->importTail(held, read);
  }
  Status setIndexer(const kv::IndexerOptions& options) override;
  kv::IndexerOptions indexer() const override { return m_indexer; }
  IndexerStep indexerStep() const override { return m_indexerStep; }
  ExpertUsage expertUsage() const override { return m_experts.usage(); }
  const ExpertLog* expertLog() const override { return &m_experts; }
  void setExpertLog(const ExpertLog& log) override { m_experts = log; }

 private:
  friend class CpuStep;
  CpuBackend() = default;
  void store(uint32_t layer, kv::KvPart part, uint32_t head, uint32_t index,
             std::span<const float> row);
  Status step(const Batch& batch, Logits& out, const Description& describe);
  // Two-phase, at the first decode step: the cached rows recoded into the
  // pending schemes, their codec error measured from the f16 rows.
  Status compressRows();
  void measureRecoded(const kv::KvCache& f16, const kv::KvCache& recoded);
  void refreshSelection();
  // A 1-D weight (norm, bias) as float32, converted once at load.
  std::span<const float> floats(const model::TensorView& t) const { return m_vectors.at(&t); }
  // Expert e of a stacked expert tensor as a 2-D weight (model::expertMatrix),
  // made at load, so a step's products point at views that stay put. A fused
  // gate/up stack's views alternate: 2e is expert e's gate, 2e + 1 its up.
  const model::TensorView& expert(const model::TensorView& stack, uint32_t e) const {
    return m_experts2d.at(&stack)[e];
  }

  std::shared_ptr<const model::ModelFile> m_model;
  model::ModelWeights m_weights;
  std::unique_ptr<kv::KvCache> m_cache;
  uint32_t m_stepRows = kMaxStepRows;
  // Two-phase: the schemes m_cache moves to at the first decode step (empty
  // when two-phase is off), and those it has yet to move to (empty once it
  // has; trim(0) empties the cache into f16 rows again).
  std::vector<kv::LayerSchemes> m_twoPhase, m_pendingSchemes;
  // Sampled written rows (options.errorStride) against their decoded copies;
  // re-measured from the f16 rows when two-phase caching recodes them.
  CodecErrorMeter m_errors;
  std::vector<float> m_decoded;  // [headDim] scratch of store()
  model::ForwardPlan m_plan;  // over m_model's config and m_weights
  // The description's activation buffers by slot name, kept across steps.
  struct Slots {
    std::vector<std::string> names;
    std::vector<std::vector<float>> buffers;  // [rows][width] each
  } m_slots;
  std::vector<float> m_product;  // a matmul's W x before its epilogue combines it
  // CpuStep::moe's buffers, kept across steps like the slots.
  struct MoeScratch {
    std::vector<float> probs;               // [n, nExpert]
    std::vector<uint32_t> picked, order;    // [n, nUsed], [nExpert]
    std::vector<float> weight;              // [n, nUsed]
    std::vector<float> slots;               // [n, nUsed, width]
    std::vector<uint32_t> first, cursor;    // [nExpert + 1]: each expert's start in rows
    std::vector<uint32_t> rows;             // [n * nUsed]: token * nUsed + slot, by expert
    std::vector<float> gathered, gate, up, product;  // [batch rows, width or ff]
    std::vector<cpu::Product> products;              // one projection of a batch
  } m_moe;
  std::unique_ptr<ThreadPool> m_pool;
  std::unordered_map<const model::TensorView*, std::vector<float>> m_vectors;
  std::unordered_map<const model::TensorView*, std::vector<model::TensorView>> m_experts2d;
  uint32_t m_contextLimit = 0;
  uint32_t m_errorStride = 16;
  cpu::MatmulPrecision m_matmul = cpu::MatmulPrecision::kExact;
  kv::IndexerOptions m_indexer;
  kv::IndexerOptions m_selection;  // refreshSelection()
  IndexerStep m_indexerStep;
  ExpertLog m_experts;  // a model with experts: each cached row's picks
};

}  // namespace kvscope::backend
