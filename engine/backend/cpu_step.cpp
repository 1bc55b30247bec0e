#include "backend/cpu_step.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu_attention.h"
#include "backend/cpu_backend.h"
#include "backend/cpu_indexer.h"
#include "backend/cpu_matmul.h"
#include "backend/cpu_ops.h"

namespace kvscope::backend {

using model::Act;

CpuStep::CpuStep(CpuBackend& backend, std::span<const int32_t> tokens, uint32_t pos0,
                 bool allLogits, Logits& out)
    : m_b(backend),
      m_tokens(tokens),
      m_n(static_cast<uint32_t>(tokens.size())),
      m_pos0(pos0),
      m_logitRows(allLogits ? m_n : 1),
      m_out(out) {}

// The buffers live in the backend across steps (a long prefill would
// otherwise allocate and zero ~100 MB per call); a decode step hands back
// what a prefill grew beyond 64 rows.
Act CpuStep::act(std::string_view slot, uint32_t width) {
  auto& slots = m_b.m_slots;
  auto it = std::find(slots.names.begin(), slots.names.end(), slot);
  if (it == slots.names.end()) {
    slots.names.emplace_back(slot);
    slots.buffers.emplace_back();
    it = slots.names.end() - 1;
  }
  const auto index = static_cast<uint32_t>(it - slots.names.begin());
  std::vector<float>& buffer = slots.buffers[index];
  if (m_n == 1 && buffer.size() > size_t{64} * width) buffer = {};
  if (buffer.size() < size_t{m_n} * width) buffer.resize(size_t{m_n} * width);
  return {index, width};
}

std::span<float> CpuStep::span(Act a) {
  const size_t rows = a.logitRows ? m_logitRows : m_n;
  if (a.slot == kLogitsSlot) return m_out.values;
  return std::span(m_b.m_slots.buffers[a.slot]).first(rows * a.width);
}

void CpuStep::captured(Act out, model::OpName name) {
  if (m_b.m_dump.wants(name)) m_b.m_dump.append(span(out), out.width);
}

Expected<Act> CpuStep::logitRows(Act x, model::OpName name) {
  Act rows = act("logit_rows", x.width);
  rows.logitRows = true;
  const std::span<const float> from = span(x).subspan(size_t{m_n - m_logitRows} * x.width);
  std::copy(from.begin(), from.end(), span(rows).begin());
  captured(rows, name);
  return rows;
}

Act CpuStep::logits(uint32_t vocab) {
  m_out.rows = m_logitRows;
  m_out.vocab = vocab;
  m_out.values.resize(size_t{m_logitRows} * vocab);
  return {kLogitsSlot, vocab, true};
}

Status CpuStep::embed(const model::TensorView& table, Act out, float scale, model::OpName name) {
  const std::span<float> rows = span(out);
  for (uint32_t t = 0; t < m_n; ++t)
    cpu::dequantizeRow(table, m_tokens[t], rows.subspan(size_t{t} * out.width, out.width));
  if (scale != 1.0f)
    for (float& x : rows) x *= scale;
  captured(out, name);
  return okStatus();
}

Status CpuStep::rmsnorm(Act x, const model::TensorView* weight, Act out, uint32_t group, float eps,
                        model::OpName name) {
  const std::span<float> in = span(x);
  cpu::rmsnorm(in, weight ? m_b.floats(*weight) : std::span<const float>{}, span(out), group,
               in.size() / group, eps);
  captured(out, name);
  return okStatus();
}

Status CpuStep::rmsnormAdd(Act x, const model::TensorView& weight, Act out, float eps,
                           model::OpName name) {
  const std::span<const float> in = span(x);
  cpu::rmsnorm(in, m_b.floats(weight), span(out), x.width, in.size() / x.width, eps, true);
  captured(out, name);
  return okStatus();
}

Status CpuStep::scale(Act x, float s, model::OpName name) {
  for (float& v : span(x)) v *= s;
  captured(x, name);
  return okStatus();
}

Status CpuStep::add(Act x, Act out, model::OpName name) {
  if (x.width != out.width)
    return makeError(ErrorCode::kInternal, "add of {} values to {}", x.width, out.width);
  const std::span<const float> in = span(x);
  const std::span<float> y = span(out);
  for (size_t i = 0; i < y.size(); ++i) y[i] += in[i];
  captured(out, name);
  return okStatus();
}

Status CpuStep::gatedMul(model::Gate act, Act gate, Act up, uint32_t upFirst, model::OpName name) {
  if (upFirst + gate.width > up.width) {
    return makeError(ErrorCode::kInternal, "gated product of columns [{}, {}) of {}", upFirst,
                     upFirst + gate.width, up.width);
  }
  const std::span<float> g = span(gate);
  const std::span<const float> u = span(up);
  for (uint32_t t = 0; t < m_n; ++t) {
    const std::span<float> row = g.subspan(size_t{t} * gate.width, gate.width);
    cpu::gatedMul(act, row, u.subspan(size_t{t} * up.width + upFirst, gate.width), row);
  }
  captured(gate, name);
  return okStatus();
}

Status CpuStep::softCap(Act x, float cap, model::OpName name) {
  for (float& v : span(x)) v = cap * std::tanh(v / cap);
  captured(x, name);
  return okStatus();
}

Status CpuStep::matmul(const model::TensorView& w, Act x, Act out, const model::Epilogue& e,
                       model::OpName name) {
  const auto rows = static_cast<uint32_t>(span(x).size() / x.width);
  const std::span<float> y = span(out);
  KVS_TRY(model::checkEpilogue(e, out.width));
  if (w.shape.size() != 2 || w.shape[0] != x.width || w.shape[1] != out.width) {
    return makeError(ErrorCode::kInternal, "{}: weight '{}' of {} x {} for {} -> {} values",
                     name.str(), w.name, w.shape.at(0), w.shape.size() > 1 ? w.shape[1] : 1,
                     x.width, out.width);
  }
  const bool combine = e.accumulate || e.gate != model::Gate::kNone;
  std::span<float> product = y;
  if (combine) {
    if (m_n == 1 && m_b.m_product.size() > size_t{64} * out.width) m_b.m_product = {};
    if (m_b.m_product.size() < y.size()) m_b.m_product.resize(y.size());
    product = std::span(m_b.m_product).first(y.size());
  }
  cpu::matmul(w, span(x), product, rows, *m_b.m_pool, m_b.m_matmul);
  if (e.bias) cpu::addBias(product, m_b.floats(*e.bias));
  if (e.gate != model::Gate::kNone) {
    cpu::gatedMul(e.gate, y, product, y);
  } else if (e.accumulate) {
    for (size_t i = 0; i < y.size(); ++i) y[i] += product[i];
  }
  captured(out, name);
  return okStatus();
}

// One angle table per step and RoPE spec: the spec's first rope() computes it.
Status CpuStep::rope(Act x, uint32_t heads, uint32_t headDim, const model::RopeSpec& spec,
                     model::OpName name) {
  auto it = std::find_if(m_ropeTables.begin(), m_ropeTables.end(),
                         [&](const auto& t) { return t.first == &spec; });
  if (it == m_ropeTables.end()) {
    std::vector<float> angles(size_t{m_n} * spec.dims);
    cpu::ropeTable(spec, m_pos0, m_n, angles);
    it = m_ropeTables.emplace(m_ropeTables.end(), &spec, std::move(angles));
  }
  const std::vector<float>& table = it->second;
  const std::span<float> rows = span(x);
  const bool neox = spec.style == model::RopeStyle::kNeox;
  for (uint32_t t = 0; t < m_n; ++t) {
    const std::span<const float> angles =
        std::span(table).subspan(size_t{t} * spec.dims, spec.dims);
    for (uint32_t h = 0; h < heads; ++h)
      cpu::ropeApply(rows.subspan((size_t{t} * heads + h) * headDim, headDim), spec.dims, neox,
                     angles, spec.scale);
  }
  captured(x, name);
  return okStatus();
}

Status CpuStep::attention(Act q, Act k, Act v, Act out, const model::AttentionSpec& spec,
                          model::OpName name) {
  KVS_TRY(model::checkAttentionSpec(spec, "CPU"));
  const uint32_t l = spec.layer, d = spec.headDim;
  const std::span<const float> kr = span(k), vr = span(v);
  for (uint32_t t = 0; t < m_n; ++t) {
    for (uint32_t h = 0; h < spec.nHeadKv; ++h) {
      const size_t off = (size_t{t} * spec.nHeadKv + h) * d;
      m_b.store(l, kv::KvPart::kKey, h, m_pos0 + t, kr.subspan(off, d));
      m_b.store(l, kv::KvPart::kValue, h, m_pos0 + t, vr.subspan(off, d));
    }
  }
  return attend(q, out, spec, true, name);
}

Status CpuStep::attendCache(Act q, Act out, const model::AttentionSpec& spec, model::OpName name) {
  KVS_TRY(model::checkAttentionSpec(spec, "CPU"));
  return attend(q, out, spec, false, name);
}

Status CpuStep::attend(Act q, Act out, const model::AttentionSpec& spec, bool owner,
                       model::OpName name) {
  const uint32_t l = spec.layer;
  const float* qr = span(q).data();
  cpu::AttentionOptions options{
      .int8Queries = m_b.m_matmul == cpu::MatmulPrecision::kInt8Activations,
      .sparseV = m_b.m_indexer.sparseV,
      .scale = spec.scale,
      .window = spec.window,
      .sinks = spec.sinks ? m_b.floats(*spec.sinks).data() : nullptr};
  // A decode step with the indexer on attends the rows it selects; a window
  // layer's few rows, and the first layers (IndexerOptions::denseLayers),
  // are attended whole. The step shown per cache layer is its owner's; a
  // KV-shared layer selects for its own query, unrecorded.
  IndexerLayerStep shared;
  IndexerLayerStep& step = owner ? m_b.m_indexerStep.layers[l] : shared;
  if (m_b.m_indexer.enabled() && m_n == 1 && (spec.window != 0 || !m_b.m_indexer.selects(l))) {
    step.heads.assign(spec.nHeadKv, {});  // every row of the window
    step.setMass(std::vector<double>(m_b.m_indexer.diagnostic ? spec.nHeadKv : 0, 1.0));
  } else if (m_b.m_indexer.enabled() && m_n == 1) {
    kv::KvCache& cache = *m_b.m_cache;
    ThreadPool& pool = *m_b.m_pool;
    if (cpu::selectLayerRows(cache, l, qr, spec.nHead, m_b.m_selection, pool, step.heads))
      options.selection = &step.heads;
    if (!m_b.m_indexer.diagnostic) {
      step.setMass({});
    } else if (options.selection) {
      step.setMass(cpu::capturedMass(cache, l, qr, spec.nHead, step.heads, pool, spec.scale));
    } else {
      step.setMass(std::vector<double>(spec.nHeadKv, 1.0));
    }
  }
  cpu::attention(*m_b.m_cache, l, qr, m_n, m_pos0, spec.nHead, *m_b.m_pool, span(out).data(),
                 options);
  captured(out, name);
  return okStatus();
}

// Each token's experts are picked first; then each expert used by any token
// runs once over the rows of the tokens that picked it (a prefill reads each
// expert's weights once), into that token's slot. The slots are summed in
// pick order, as llama.cpp sums them, before the residual add.
Status CpuStep::moe(Act x, const model::MoeSpec& spec, Act out, model::OpName name) {
  const uint32_t width = x.width, nUsed = spec.nUsed, nExpert = spec.nExpert;
  const std::span<const float> in = span(x);
  ThreadPool& pool = *m_b.m_pool;
  CpuBackend::MoeScratch& s = m_b.m_moe;
  if (m_n == 1 && s.slots.size() > size_t{64} * nUsed * width) s = {};  // after a prefill
  s.probs.resize(size_t{m_n} * nExpert);
  cpu::matmul(*spec.router, spec.routerInput.width ? span(spec.routerInput) : in, s.probs, m_n,
              pool, m_b.m_matmul);
  if (spec.routerBias) cpu::addBias(s.probs, m_b.floats(*spec.routerBias));
  const bool softmaxFirst = spec.weighting == model::ExpertWeighting::kSoftmaxTopK;
  if (softmaxFirst) cpu::softmax(s.probs, s.probs, nExpert, m_n);

  s.picked.resize(size_t{m_n} * nUsed);  // [token][slot]: the expert
  s.weight.resize(size_t{m_n} * nUsed);  // [token][slot]
  s.order.resize(nExpert);
  for (uint32_t t = 0; t < m_n; ++t) {
    const float* p = &s.probs[size_t{t} * nExpert];
    for (uint32_t e = 0; e < nExpert; ++e) s.order[e] = e;
    // NaN scores (a broken file) sort last, so the order stays strict.
    const auto key = [&](uint32_t e) { return std::isnan(p[e]) ? -INFINITY : p[e]; };
    std::partial_sort(s.order.begin(), s.order.begin() + nUsed, s.order.end(),
                      [&](uint32_t a, uint32_t b) {
                        return key(a) > key(b) || (key(a) == key(b) && a < b);
                      });
    const std::span<float> weights = std::span(s.weight).subspan(size_t{t} * nUsed, nUsed);
    for (uint32_t k = 0; k < nUsed; ++k) {
      s.picked[size_t{t} * nUsed + k] = s.order[k];
      weights[k] = p[s.order[k]];
    }
    if (softmaxFirst) {
      float sum = 0.0f;
      for (float w : weights) sum += w;
      for (float& w : weights) w /= std::max(sum, 6.103515625e-5f);
    } else {
      cpu::softmax(weights, weights, nUsed, 1);
    }
    if (spec.scale != 0.0f && spec.scale != 1.0f)
      for (float& w : weights) w *= spec.scale;
    if (name.layer >= 0) {
      m_b.m_experts.record(static_cast<uint32_t>(name.layer), m_pos0 + t,
                           std::span(s.picked).subspan(size_t{t} * nUsed, nUsed));
    }
  }

  // The (token, slot)s grouped by expert: expert e's are rows[first[e], first[e + 1]).
  s.first.assign(nExpert + 1, 0);
  for (uint32_t e : s.picked) ++s.first[e + 1];
  for (uint32_t e = 0; e < nExpert; ++e) s.first[e + 1] += s.first[e];
  s.rows.resize(s.picked.size());
  s.cursor.assign(s.first.begin(), s.first.end() - 1);
  for (size_t i = 0; i < s.picked.size(); ++i)
    s.rows[s.cursor[s.picked[i]]++] = static_cast<uint32_t>(i);

  // Adds expert e's slice of a stacked bias {n, nExpert} to each row.
  const auto addExpertBias = [&](const model::TensorView* bias, uint32_t e, std::span<float> rows) {
    if (!bias) return;
    const size_t n = bias->shape[0];
    cpu::addBias(rows, m_b.floats(*bias).subspan(e * n, n));
  };
  // Experts run in batches of consecutive used experts holding at most
  // kBatchRows rows (or one expert with more): each projection of a batch is
  // one cpu::matmuls call, so a decode step's chosen experts share one
  // parallel loop per projection, while a prefill's large experts run alone.
  // Every (token, slot) is written once below: no zeroing.
  constexpr size_t kBatchRows = 64;
  s.slots.resize(size_t{m_n} * nUsed * width);  // [token][slot][width]
  for (uint32_t e0 = 0; e0 < nExpert;) {
    uint32_t e1 = e0 + 1;
    while (e1 < nExpert && s.first[e1 + 1] - s.first[e0] <= kBatchRows) ++e1;
    const size_t r0 = s.first[e0], m = s.first[e1] - r0;  // the batch's rows
    s.gathered.resize(m * width);
    for (size_t r = 0; r < m; ++r)
      std::copy_n(&in[size_t{s.rows[r0 + r] / nUsed} * width], width, &s.gathered[r * width]);
    s.gate.resize(m * spec.ff);
    s.up.resize(m * spec.ff);
    s.product.resize(m * width);
    // Expert e's rows of a batch buffer with `n` values a row.
    const auto part = [&](std::vector<float>& v, uint32_t e, size_t n) {
      return std::span(v).subspan((s.first[e] - r0) * n, (s.first[e + 1] - s.first[e]) * n);
    };
    s.products.clear();
    for (uint32_t e = e0; e < e1; ++e) {
      const size_t rows = s.first[e + 1] - s.first[e];
      if (rows == 0) continue;
      const std::span<const float> rowsIn = part(s.gathered, e, width);
      // A fused stack's views alternate gate and up (CpuBackend::expert).
      const model::TensorView& gate =
          spec.gateUp ? m_b.expert(*spec.gateUp, 2 * e) : m_b.expert(*spec.gate, e);
      const model::TensorView& up =
          spec.gateUp ? m_b.expert(*spec.gateUp, 2 * e + 1) : m_b.expert(*spec.up, e);
      s.products.push_back({&gate, rowsIn, part(s.gate, e, spec.ff), rows});
      s.products.push_back({&up, rowsIn, part(s.up, e, spec.ff), rows});
    }
    cpu::matmuls(s.products, pool, m_b.m_matmul);
    s.products.clear();
    for (uint32_t e = e0; e < e1; ++e) {
      const size_t rows = s.first[e + 1] - s.first[e];
      if (rows == 0) continue;
      addExpertBias(spec.gateBias, e, part(s.gate, e, spec.ff));
      addExpertBias(spec.upBias, e, part(s.up, e, spec.ff));
      s.products.push_back(
          {&m_b.expert(*spec.down, e), part(s.gate, e, spec.ff), part(s.product, e, width), rows});
    }
    cpu::gatedMul(spec.act, s.gate, s.up, s.gate);
    cpu::matmuls(s.products, pool, m_b.m_matmul);
    // Each expert's output scale (Gemma 4), then its bias (gpt-oss), as
    // llama.cpp applies them.
    const std::span<const float> downScale =
        spec.downScale ? m_b.floats(*spec.downScale) : std::span<const float>{};
    for (uint32_t e = e0; e < e1; ++e) {
      if (s.first[e + 1] == s.first[e]) continue;
      if (!downScale.empty())
        for (float& v : part(s.product, e, width)) v *= downScale[e];
      addExpertBias(spec.downBias, e, part(s.product, e, width));
    }
    for (size_t r = 0; r < m; ++r) {
      const uint32_t i = s.rows[r0 + r];
      const float w = s.weight[i];
      float* slot = &s.slots[size_t{i} * width];
      for (uint32_t c = 0; c < width; ++c) slot[c] = w * s.product[r * width + c];
    }
    e0 = e1;
  }

  const Act moeOut = act("moe_out", width);
  const std::span<float> sum = span(moeOut);
  for (uint32_t t = 0; t < m_n; ++t) {
    float* y = &sum[size_t{t} * width];
    std::copy_n(&s.slots[size_t{t} * nUsed * width], width, y);
    for (uint32_t k = 1; k < nUsed; ++k) {
      const float* slot = &s.slots[(size_t{t} * nUsed + k) * width];
      for (uint32_t i = 0; i < width; ++i) y[i] += slot[i];
    }
  }
  captured(moeOut, {"ffn_moe_out", name.layer});
  const std::span<float> residual = span(out);
  if (spec.accumulate) {
    for (size_t i = 0; i < residual.size(); ++i) residual[i] += sum[i];
  } else {
    std::copy(sum.begin(), sum.end(), residual.begin());
  }
  captured(out, name);
  return okStatus();
}

}  // namespace kvscope::backend
