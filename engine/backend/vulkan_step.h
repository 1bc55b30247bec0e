#pragma once
// VulkanStep: one forward() chunk of the VulkanBackend, recording the model
// description's ops (model/forward_ops.h) into the backend's command buffer
// as they are called. A barrier goes in only where an op reads or writes an
// activation an earlier op of the same barrier interval wrote, so
// independent ops (the q, k and v projections) run without one between them.
// Weights are the VulkanModel's device copies; the embedding rows and the
// RoPE angle tables are computed on the host (cpu::dequantizeRow,
// cpu::ropeTable), so both match the CpuBackend exactly.

#include <span>
#include <vector>

#include "backend/backend.h"
#include "gpu/buffer.h"
#include "model/forward_ops.h"

namespace kvscope::backend {

class VulkanBackend;

class VulkanStep final : public model::ForwardOps {
 public:
  // The chunk of `tokens` at positions pos0.. (the backend's activations hold
  // at least tokens.size() rows and its pages the rows they add); lastChunk:
  // the batch's last (whose logit rows are the batch's).
  VulkanStep(VulkanBackend& backend, std::span<const int32_t> tokens, uint32_t pos0, bool allLogits,
             bool lastChunk);

  model::Act act(std::string_view slot, uint32_t width) override;
  Expected<model::Act> logitRows(model::Act x, model::OpName name) override;
  model::Act logits(uint32_t vocab) override;
  Status embed(const model::TensorView& table, model::Act out, float scale,
               model::OpName name) override;
  Status rmsnorm(model::Act x, const model::TensorView* weight, model::Act out, uint32_t group,
                 float eps, model::OpName name) override;
  Status rmsnormAdd(model::Act x, const model::TensorView& weight, model::Act out, float eps,
                    model::OpName name) override;
  Status matmul(const model::TensorView& w, model::Act x, model::Act out,
                const model::Epilogue& epilogue, model::OpName name) override;
  Status rope(model::Act x, uint32_t heads, uint32_t headDim, const model::RopeSpec& spec,
              model::OpName name) override;
  Status scale(model::Act x, float s, model::OpName name) override;
  Status add(model::Act x, model::Act out, model::OpName name) override;
  Status gatedMul(model::Gate act, model::Act gate, model::Act up, uint32_t upFirst,
                  model::OpName name) override;
  Status softCap(model::Act x, float cap, model::OpName name) override;
  Status attendCache(model::Act q, model::Act out, const model::AttentionSpec& spec,
                     model::OpName name) override;
  Status attention(model::Act q, model::Act k, model::Act v, model::Act out,
                   const model::AttentionSpec& spec, model::OpName name) override;
  Status moe(model::Act x, const model::MoeSpec& spec, model::Act out, model::OpName name) override;

  // After the submit: appends the captured tensor (if any) to the dump.
  Status collectDump();

 private:
  gpu::Buffer& buffer(model::Act a);
  uint32_t rows(model::Act a) const { return a.logitRows ? m_logitRows : m_n; }
  // Inserts a barrier when an op reading `reads` and writing `writes` (and,
  // with `scratch`, the attention scratch) would race an access of the
  // current barrier interval: a read of something written, a write of
  // something read or written. Then records the op's accesses.
  void order(std::initializer_list<model::Act> reads, std::initializer_list<model::Act> writes,
             bool scratch = false);
  Status captured(model::Act out, model::OpName name);
  // Attention of q over spec.layer's cached rows, by the layer that wrote
  // them (`owner`) or by a KV-shared layer.
  Status attend(model::Act q, model::Act out, const model::AttentionSpec& spec, bool owner,
                model::OpName name);

  VulkanBackend& m_b;
  std::span<const int32_t> m_tokens;
  uint32_t m_n, m_pos0, m_logitRows;
  bool m_lastChunk;
  // Per resource (order()), accessed since the last barrier.
  std::vector<bool> m_written, m_read;
  std::vector<const model::RopeSpec*> m_ropeSpecs;  // spec i's table: m_b's ropeTables[i]
  Status m_error;                                   // an act() buffer that could not be made
  gpu::Buffer m_dump;                               // host-visible copy of the captured tensor
  uint32_t m_dumpWidth = 0;
};

}  // namespace kvscope::backend
