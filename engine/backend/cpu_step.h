#pragma once
// CpuStep: one forward() of the CpuBackend, executing the model description's
// ops (model/forward_ops.h) eagerly as they are called, on the backend's
// buffers, weights, KV cache and thread pool.

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "model/forward_ops.h"

namespace kvscope::backend {

class CpuBackend;

class CpuStep final : public model::ForwardOps {
 public:
  // The step of `tokens` at positions pos0.. (their rows already reserved in
  // the cache, which attention() fills), writing its logits to `out`.
  CpuStep(CpuBackend& backend, std::span<const int32_t> tokens, uint32_t pos0, bool allLogits,
          Logits& out);

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
  Status attention(model::Act q, model::Act k, model::Act v, model::Act out,
                   const model::AttentionSpec& spec, model::OpName name) override;
  Status attendCache(model::Act q, model::Act out, const model::AttentionSpec& spec,
                     model::OpName name) override;
  Status moe(model::Act x, const model::MoeSpec& spec, model::Act out, model::OpName name) override;

 private:
  static constexpr uint32_t kLogitsSlot = ~0u;
  std::span<float> span(model::Act a);
  void captured(model::Act out, model::OpName name);
  // The attention of q over layer spec.layer's rows; `owner`: the layer that
  // appended them (a KV-shared layer's attention records no indexer step).
  Status attend(model::Act q, model::Act out, const model::AttentionSpec& spec, bool owner,
                model::OpName name);

  CpuBackend& m_b;
  std::span<const int32_t> m_tokens;
  uint32_t m_n, m_pos0, m_logitRows;
  Logits& m_out;
  // [n][dims / 2][cos, sin] per RoPE spec of the step.
  std::vector<std::pair<const model::RopeSpec*, std::vector<float>>> m_ropeTables;
};

}  // namespace kvscope::backend
