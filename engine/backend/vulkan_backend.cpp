#include "backend/vulkan_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu_matmul.h"
#include "backend/cpu_ops.h"
#include "backend/rope_factors.h"
#include "gguf/dequant.h"
#include "kv/kv_index.h"

namespace kvscope::backend {

// Activation buffers for batches of up to `capacity` tokens, shapes per token.
struct VulkanBackend::Activations {
  uint32_t capacity = 0;
  gpu::Buffer x, xb;        // [n, nEmbd]
  gpu::Buffer q, att;       // [n, nHead * headDim]
  gpu::Buffer k, v;         // [n, nHeadKv * headDim]
  gpu::Buffer gate;         // [n, nFf]
  gpu::Buffer ropeTable;    // [n, rope.dims / 2] (cos, sin)
  gpu::Buffer last, lastNorm;  // [nEmbd]: the row whose logits are wanted
  gpu::Buffer logits;       // [n, nVocab], host-visible
  gpu::AttentionScratch scratch;
};

VulkanBackend::~VulkanBackend() = default;


std::vector<KernelTiming> VulkanBackend::kernelTimings() const {
  std::vector<KernelTiming> out;
  for (const auto& t : m_rec->kernelTimes()) out.push_back({t.kernelClass, t.dispatches, t.gpuMs});
  return out;
}

Expected<std::unique_ptr<VulkanBackend>> VulkanBackend::create(std::shared_ptr<const model::ModelFile> model,
                                                               const VulkanBackendOptions& options) {
  KVS_ASSIGN_OR_RETURN(auto shared, VulkanModel::shared(std::move(model), {.device = options.device,
                                                                           .validation = options.validation}));
  return create(std::move(shared), options);
}

Expected<std::unique_ptr<VulkanBackend>> VulkanBackend::create(std::shared_ptr<VulkanModel> shared,
                                                               const VulkanBackendOptions& options) {
  std::unique_ptr<VulkanBackend> b(new VulkanBackend());
  b->m_shared = std::move(shared);
  b->m_options = options;
  const auto& c = b->config();
  KVS_ASSIGN_OR_RETURN(b->m_rec, gpu::Recorder::create(b->m_shared->context(), {.timing = options.timing}));
  b->m_contextLimit = options.contextLimit ? options.contextLimit : c.contextLength;
  // Pages never move; their count is bounded by the page-array binding, so a
  // long context gets bigger pages rather than more of them.
  const uint32_t perPage = (b->m_contextLimit + gpu::AttentionKernels::kMaxPages - 1) / gpu::AttentionKernels::kMaxPages;
  const uint32_t rowsPerPage = std::max<uint32_t>(256, (perPage + 63) / 64 * 64);
  KVS_TRY(b->createKvLayout(rowsPerPage));
  KVS_TRY(b->setIndexer(options.indexer));
  if (options.errorStride > 0) {
    b->m_errors = CodecErrorMeter(c.nLayer);
    const size_t probeBytes = size_t{c.nLayer} * 2 * c.kvDim() * sizeof(float);
    KVS_ASSIGN_OR_RETURN(b->m_probe,
                         gpu::Buffer::create(b->m_shared->context(), probeBytes, gpu::MemoryUse::kHost));
  }
  return b;
}

// The page layout of the options' KV schemes (kv::KvLayout, as the CPU
// backend's KvCache holds it) and its device view: each (layer, part) stream
// gets the codec of its scheme and, for a rotated scheme, its rotation on the
// device. The view must address the same bytes as the layout.
Status VulkanBackend::createKvLayout(uint32_t rowsPerPage) {
  const auto& c = config();
  const std::vector<kv::LayerSchemes> f16(c.nLayer);
  const std::vector<kv::LayerSchemes>& layers =
      m_options.kvSchemes.empty() ? f16 : m_options.kvSchemes;
  KVS_ASSIGN_OR_RETURN(m_kvLayout, kv::KvLayout::create({c.nLayer, c.nHeadKv, c.headDim, rowsPerPage},
                                                        layers, m_options.kvSeed));
  m_layout = gpu::KvPageLayout::f16(c.nLayer, c.nHeadKv, c.headDim, rowsPerPage);
  m_rotations.reserve(size_t{c.nLayer} * 2);  // KvStream::rotation points into it
  for (uint32_t l = 0; l < c.nLayer; ++l) {
    for (uint32_t part = 0; part < 2; ++part) {
      const kv::KvScheme& scheme = m_kvLayout.scheme(l, static_cast<kv::KvPart>(part));
      gpu::KvStream& stream = m_layout.streams[size_t{l} * 2 + part];
      KVS_ASSIGN_OR_RETURN(stream.codec, gpu::kvCodecFor(scheme.name()));
      if (m_layout.rowBytes(l, part) != scheme.rowBytes()) {
        return makeError(ErrorCode::kInternal,
                         "KV scheme '{}' stores {}-byte rows, its GPU codec {}", scheme.name(),
                         scheme.rowBytes(), m_layout.rowBytes(l, part));
      }
      if (scheme.rotated()) {
        stream.codebook.assign(scheme.codebook().begin(), scheme.codebook().end());
        KVS_ASSIGN_OR_RETURN(auto rotation, gpu::uploadRotation(m_shared->context(), scheme.rotation()));
        m_rotations.push_back(std::move(rotation));
        stream.rotation = &m_rotations.back();
      }
    }
  }
  if (m_layout.pageBytes() != m_kvLayout.pageBytes())
    return makeError(ErrorCode::kInternal, "the device KV pages differ from the KV layout");
  return okStatus();
}

Status VulkanBackend::ensureActivations(uint32_t n) {
  if (m_act && m_act->capacity >= n) return okStatus();
  const auto& c = config();
  auto a = std::make_unique<Activations>();
  a->capacity = n;
  auto make = [&](gpu::Buffer& b, size_t floats, gpu::MemoryUse use = gpu::MemoryUse::kDevice) -> Status {
    KVS_ASSIGN_OR_RETURN(b, gpu::Buffer::create(m_shared->context(), floats * sizeof(float), use));
    return okStatus();
  };
  KVS_TRY(make(a->x, size_t{n} * c.nEmbd));
  KVS_TRY(make(a->xb, size_t{n} * c.nEmbd));
  KVS_TRY(make(a->q, size_t{n} * c.qDim()));
  KVS_TRY(make(a->att, size_t{n} * c.qDim()));
  KVS_TRY(make(a->k, size_t{n} * c.kvDim()));
  KVS_TRY(make(a->v, size_t{n} * c.kvDim()));
  KVS_TRY(make(a->gate, size_t{n} * c.nFf));
  KVS_TRY(make(a->ropeTable, size_t{n} * c.rope.dims, gpu::MemoryUse::kHost));
  KVS_TRY(make(a->last, c.nEmbd));
  KVS_TRY(make(a->lastNorm, c.nEmbd));
  KVS_TRY(make(a->logits, size_t{n} * c.nVocab, gpu::MemoryUse::kHost));
  KVS_ASSIGN_OR_RETURN(a->scratch, m_shared->attention().makeScratch(m_layout, c.nHead, n, m_contextLimit));
  m_act = std::move(a);
  return okStatus();
}

Status VulkanBackend::ensurePages(uint32_t rows) {
  while (m_pages.size() * m_layout.rowsPerPage < rows) {
    KVS_ASSIGN_OR_RETURN(auto page, gpu::Buffer::create(m_shared->context(), m_layout.pageBytes()));
    m_pages.push_back(std::move(page));
  }
  m_pagePtrs.clear();
  for (const auto& p : m_pages) m_pagePtrs.push_back(&p);
  return okStatus();
}

Status VulkanBackend::trim(uint32_t n) {
  if (n > m_rows) return makeError(ErrorCode::kInternal, "cannot trim {} cached tokens to {}", m_rows, n);
  m_rows = n;
  // The sidecar needs nothing: the next write rebuilds its partial page.
  if (n < m_indexerStep.rows) m_indexerStep = {};  // it described rows that are gone
  const size_t keep = (size_t{n} + m_layout.rowsPerPage - 1) / m_layout.rowsPerPage;
  if (m_pages.size() > keep) {
    m_pages.resize(keep);
    KVS_TRY(ensurePages(n));
  }
  return okStatus();
}

Status VulkanBackend::setIndexer(const kv::IndexerOptions& options) {
  KVS_TRY(options.check());
  const auto& c = config();
  std::unique_ptr<gpu::IndexerBuffers> index;
  if (options.enabled()) {
    const gpu::IndexerShape shape{.pageRows = options.pageRows,
                                  .sinks = options.sinks,
                                  .window = options.window,
                                  .pickedPages = kv::pickedPages(options),
                                  .entryBytes = kv::KvIndex::entryBytesFor(c.headDim),
                                  .diagnostic = options.diagnostic};
    KVS_ASSIGN_OR_RETURN(auto buffers,
                         m_shared->attention().makeIndexer(m_layout, c.nHead, m_contextLimit, shape));
    index = std::make_unique<gpu::IndexerBuffers>(std::move(buffers));
    if (m_index && m_index->shape.pageRows == options.pageRows) {
      // Same pages: the sidecar kept so far stays valid (a new budget, window
      // or the diagnostic switch need no rebuild).
      index->sidecar = std::move(m_index->sidecar);
    } else if (m_rows > 0) {  // the sidecar of the rows cached so far
      KVS_TRY(m_rec->begin());
      for (uint32_t l = 0; l < c.nLayer; ++l)
        KVS_TRY(m_shared->attention().indexRows(*m_rec, m_layout, m_pagePtrs, *index, l, 0, m_rows));
      KVS_TRY(m_rec->submitAndWait());
    }
  }
  m_indexer = options;
  m_index = std::move(index);
  if (!options.enabled()) m_indexerStep = {};
  return okStatus();
}

void VulkanBackend::readIndexerStep(uint32_t rows, bool selected) {
  const auto& c = config();
  m_indexerStep.rows = rows;
  m_indexerStep.layers.assign(c.nLayer, {});
  const gpu::IndexerBuffers& ix = *m_index;
  const auto* lists = static_cast<const uint32_t*>(ix.lists.mapped());
  for (uint32_t l = 0; l < c.nLayer; ++l) {
    IndexerLayerStep& step = m_indexerStep.layers[l];
    step.heads.resize(c.nHeadKv);
    if (!selected) {
      step.capturedMass = m_indexer.diagnostic ? 1.0 : -1.0;
      continue;
    }
    for (uint32_t h = 0; h < c.nHeadKv; ++h) {
      const uint32_t* list = lists + (size_t{l} * c.nHeadKv + h) * ix.listStride;
      std::vector<kv::RowRun>& runs = step.heads[h];
      for (uint32_t i = 0; i < std::min(list[0], ix.gatherRows); ++i) {
        const uint32_t row = list[1 + i];
        if (!runs.empty() && runs.back().end == row) {
          ++runs.back().end;
        } else {
          runs.push_back({row, row + 1});
        }
      }
    }
    if (!m_indexer.diagnostic) continue;
    // Per query head: the selection's share of the dense softmax sum.
    const auto* mass = static_cast<const uint8_t*>(ix.mass.mapped());
    const auto* dense = reinterpret_cast<const float*>(mass + ix.massStride * (size_t{l} * 2));
    const auto* picked = reinterpret_cast<const float*>(mass + ix.massStride * (size_t{l} * 2 + 1));
    double total = 0.0;
    for (uint32_t h = 0; h < c.nHead; ++h) {
      const double sum = dense[2 * h + 1];
      // A head without a positive dense sum counts as whole, as on the CPU.
      total += sum > 0.0 ? picked[2 * h + 1] * std::exp(double{picked[2 * h]} - dense[2 * h]) / sum
                         : 1.0;
    }
    step.capturedMass = total / c.nHead;
  }
}

std::vector<KvLayerBytes> VulkanBackend::kvBytes() const {
  const uint64_t capacity = uint64_t{m_layout.rowsPerPage} * m_pages.size();
  // The sidecar's entries of the indexed pages, counted with K (as kv::KvIndex does).
  const uint64_t sidecar = m_index ? uint64_t{config().nHeadKv} *
                                         ((m_rows + m_indexer.pageRows - 1) / m_indexer.pageRows) *
                                         m_index->shape.entryBytes
                                   : 0;
  std::vector<KvLayerBytes> layers;
  for (uint32_t l = 0; l < config().nLayer; ++l) {
    kv::KvBytes key = m_kvLayout.bytes(l, kv::KvPart::kKey, m_rows, capacity);
    key.sidecar = sidecar;
    layers.push_back({&m_kvLayout.scheme(l, kv::KvPart::kKey),
                      &m_kvLayout.scheme(l, kv::KvPart::kValue), key,
                      m_kvLayout.bytes(l, kv::KvPart::kValue, m_rows, capacity)});
  }
  return layers;
}

// The probed token's K and V rows, every layer and KV head, through the CPU
// schemes the pages are encoded with.
void VulkanBackend::measureProbe() {
  const auto& c = config();
  const auto* rows = static_cast<const float*>(m_probe.mapped());
  for (uint32_t l = 0; l < c.nLayer; ++l) {
    for (uint32_t part = 0; part < 2; ++part) {
      const float* stream = rows + (size_t{l} * 2 + part) * c.kvDim();
      for (uint32_t h = 0; h < c.nHeadKv; ++h) {
        m_errors.measure(l, static_cast<kv::KvPart>(part),
                         m_kvLayout.scheme(l, static_cast<kv::KvPart>(part)),
                         {stream + size_t{h} * c.headDim, c.headDim});
      }
    }
  }
}

std::vector<KvLayerError> VulkanBackend::kvErrors() const {
  std::vector<KvLayerError> layers;
  if (m_options.errorStride == 0) return layers;
  for (uint32_t l = 0; l < config().nLayer; ++l)
    layers.push_back({m_errors.error(l, kv::KvPart::kKey), m_errors.error(l, kv::KvPart::kValue)});
  return layers;
}

Expected<std::vector<float>> VulkanBackend::readKv(uint32_t layer, kv::KvPart part) const {
  const auto& c = config();
  if (layer >= c.nLayer)
    return makeError(ErrorCode::kInvalidArgument, "layer {} of a {}-layer model", layer, c.nLayer);
  const kv::KvScheme& scheme = m_kvLayout.scheme(layer, part);
  const uint32_t rowBytes = m_kvLayout.rowBytes(layer, part);
  const uint32_t perPage = m_layout.rowsPerPage;
  std::vector<float> rows(size_t{m_rows} * c.nHeadKv * c.headDim);
  std::vector<uint8_t> block(m_kvLayout.partBytes(layer, part));
  for (uint32_t page = 0; size_t{page} * perPage < m_rows; ++page) {
    KVS_TRY(m_pages[page].download(block.data(), block.size(), m_kvLayout.partOffset(layer, part)));
    const uint32_t first = page * perPage, count = std::min(perPage, m_rows - first);
    for (uint32_t h = 0; h < c.nHeadKv; ++h) {
      for (uint32_t r = 0; r < count; ++r) {
        const size_t at = (size_t{h} * perPage + r) * rowBytes;
        scheme.decode({&block[at], rowBytes},
                      {&rows[(size_t{first + r} * c.nHeadKv + h) * c.headDim], c.headDim});
      }
    }
  }
  return rows;
}

Status VulkanBackend::matmul(const VulkanModel::Matrix& w, const gpu::Buffer& x, const gpu::Buffer& y, uint32_t n,
                             const gpu::Epilogue& epilogue) {
  return m_shared->weightKernels().matmul(*m_rec, w.type, w.buffer, x, y, n, w.rows, w.cols, epilogue);
}

// One transformer block for n tokens at positions pos0.. (the tensors named as
// in the CPU backend so their values can be compared).
Status VulkanBackend::recordLayer(uint32_t l, uint32_t n, uint32_t pos0) {
  const auto& c = config();
  const VulkanModel::Layer& w = m_shared->layer(l);
  Activations& a = *m_act;
  gpu::Recorder& rec = *m_rec;
  gpu::Kernels& k = m_shared->kernels();

  // Attention block: norm, projections (+ bias / q-k norm), RoPE, cache, attend.
  KVS_TRY(k.rmsnorm(rec, a.x, w.attnNorm, a.xb, c.nEmbd, n, c.rmsEps));
  rec.barrier();
  if (c.arch->qkvBias) {
    const gpu::BufferRange bq(w.bq), bk(w.bk), bv(w.bv);
    KVS_TRY(matmul(w.wq, a.xb, a.q, n, {.bias = &bq}));
    KVS_TRY(matmul(w.wk, a.xb, a.k, n, {.bias = &bk}));
    KVS_TRY(matmul(w.wv, a.xb, a.v, n, {.bias = &bv}));
  } else {
    KVS_TRY(matmul(w.wq, a.xb, a.q, n));
    KVS_TRY(matmul(w.wk, a.xb, a.k, n));
    KVS_TRY(matmul(w.wv, a.xb, a.v, n));
  }
  rec.barrier();
  if (c.arch->qkNorm) {
    KVS_TRY(k.rmsnorm(rec, a.q, w.qNorm, a.q, c.headDim, n * c.nHead, c.rmsEps));
    KVS_TRY(k.rmsnorm(rec, a.k, w.kNorm, a.k, c.headDim, n * c.nHeadKv, c.rmsEps));
    rec.barrier();
  }
  const bool neox = c.rope.style == model::RopeStyle::kNeox;
  KVS_TRY(k.rope(rec, a.q, a.ropeTable, n, c.nHead, c.headDim, c.rope.dims, neox));
  KVS_TRY(k.rope(rec, a.k, a.ropeTable, n, c.nHeadKv, c.headDim, c.rope.dims, neox));
  rec.barrier();
  if (m_probeRow >= 0) {
    const size_t row = size_t{c.kvDim()} * sizeof(float);
    const auto t = static_cast<size_t>(m_probeRow);
    rec.copy(a.k, t * row, m_probe, (size_t{l} * 2) * row, row);
    rec.copy(a.v, t * row, m_probe, (size_t{l} * 2 + 1) * row, row);
  }
  KVS_TRY(m_shared->attention().writeKv(rec, m_layout, m_pagePtrs, l, a.k, a.v, n, pos0, a.scratch,
                               m_index.get()));
  rec.barrier();
  const gpu::SparseAttention sparse{m_indexer.sparseV, m_selectStep ? m_index.get() : nullptr};
  KVS_TRY(m_shared->attention().attend(rec, m_layout, m_pagePtrs, l, a.q, a.att, n, pos0, c.nHead,
                              a.scratch, sparse));
  rec.barrier();
  KVS_TRY(matmul(w.wo, a.att, a.x, n, {.accumulate = true}));  // the residual add
  rec.barrier();

  // Feed-forward block: norm, SwiGLU, down projection, residual.
  KVS_TRY(k.rmsnorm(rec, a.x, w.ffnNorm, a.xb, c.nEmbd, n, c.rmsEps));
  rec.barrier();
  KVS_TRY(matmul(w.gate, a.xb, a.gate, n));
  rec.barrier();
  KVS_TRY(matmul(w.up, a.xb, a.gate, n, {.siluGate = true}));  // gate = silu(gate) * up
  rec.barrier();
  KVS_TRY(matmul(w.down, a.gate, a.x, n, {.accumulate = true}));  // the residual add
  rec.barrier();
  return okStatus();
}

Status VulkanBackend::recordStep(std::span<const int32_t> tokens, uint32_t pos0, bool allLogits) {
  const auto& c = config();
  const auto n = static_cast<uint32_t>(tokens.size());
  Activations& a = *m_act;
  // Host side: embedding rows and RoPE angles (the CPU backend's exact values).
  std::vector<float> embd(size_t{n} * c.nEmbd);
  for (uint32_t t = 0; t < n; ++t) cpu::dequantizeRow(*m_shared->bound().tokenEmbd, tokens[t], {&embd[size_t{t} * c.nEmbd], c.nEmbd});
  KVS_TRY(a.x.upload(std::span<const float>(embd)));
  const uint32_t half = c.rope.dims / 2;
  const float linear = c.rope.scaling == model::RopeScaling::kLinear ? c.rope.factor : 1.0f;
  std::vector<float> table(size_t{n} * c.rope.dims), cosv(half), sinv(half);
  for (uint32_t t = 0; t < n; ++t) {
    cpu::ropeAngles(static_cast<float>(pos0 + t), c.rope.dims, c.rope.theta, linear, m_shared->ropeFreqs(), cosv, sinv);
    for (uint32_t i = 0; i < half; ++i) {
      table[(size_t{t} * half + i) * 2] = cosv[i];
      table[(size_t{t} * half + i) * 2 + 1] = sinv[i];
    }
  }
  KVS_TRY(a.ropeTable.upload(std::span<const float>(table)));

  KVS_TRY(m_rec->begin());
  for (uint32_t l = 0; l < c.nLayer; ++l) KVS_TRY(recordLayer(l, n, pos0));
  if (allLogits) {
    KVS_TRY(m_shared->kernels().rmsnorm(*m_rec, a.x, m_shared->outputNorm(), a.xb, c.nEmbd, n, c.rmsEps));
    m_rec->barrier();
    KVS_TRY(matmul(m_shared->output(), a.xb, a.logits, n));
  } else {
    m_rec->copy(a.x, size_t{n - 1} * c.nEmbd * sizeof(float), a.last, 0, c.nEmbd * sizeof(float));
    KVS_TRY(m_shared->kernels().rmsnorm(*m_rec, a.last, m_shared->outputNorm(), a.lastNorm, c.nEmbd, 1,
                                        c.rmsEps));
    m_rec->barrier();
    KVS_TRY(matmul(m_shared->output(), a.lastNorm, a.logits, 1));
  }
  return m_rec->submitAndWait();
}

Status VulkanBackend::forwardChunk(std::span<const int32_t> tokens, bool allLogits, Logits& out, uint32_t row0) {
  const auto& c = config();
  const auto n = static_cast<uint32_t>(tokens.size());
  KVS_TRY(ensureActivations(std::min(m_options.maxBatch, std::max<uint32_t>(n, 1))));
  KVS_TRY(ensurePages(m_rows + n));
  // The last position p of this chunk with p % errorStride == 0, if any.
  const uint32_t stride = m_options.errorStride;
  m_probeRow = -1;
  if (stride > 0) {
    const uint32_t last = m_rows + n - 1, sampled = last - last % stride;
    if (sampled >= m_rows) m_probeRow = sampled - m_rows;
  }
  KVS_TRY(recordStep(tokens, m_rows, allLogits));
  if (m_probeRow >= 0) measureProbe();
  m_rows += n;
  const uint32_t rows = allLogits ? n : 1;
  return m_act->logits.download(out.values.data() + size_t{row0} * c.nVocab, size_t{rows} * c.nVocab * sizeof(float));
}

Status VulkanBackend::forward(const Batch& batch, Logits& out) {
  const auto& c = config();
  const auto n = static_cast<uint32_t>(batch.tokens.size());
  if (n == 0) return makeError(ErrorCode::kInvalidArgument, "empty batch");
  if (uint64_t{m_rows} + n > m_contextLimit) {
    return makeError(ErrorCode::kInvalidArgument, "the context is full: {} cached + {} new tokens exceed the limit of {}",
                     m_rows, n, m_contextLimit);
  }
  for (int32_t tok : batch.tokens) {
    if (tok < 0 || static_cast<uint32_t>(tok) >= c.nVocab) {
      return makeError(ErrorCode::kInvalidArgument, "token id {} is outside the vocabulary of {}", tok, c.nVocab);
    }
  }
  // A decode step with the indexer on attends the rows it selects, unless
  // they would be every row.
  const bool indexed = m_indexer.enabled() && n == 1;
  m_selectStep = indexed && !kv::selectsAll(m_indexer, m_rows + 1);
  out.vocab = c.nVocab;
  out.rows = batch.allLogits ? n : 1;
  out.values.resize(size_t{out.rows} * c.nVocab);
  // Batches larger than the activation buffers run in chunks; only the last
  // chunk's final row matters unless every row's logits are wanted.
  for (uint32_t done = 0; done < n;) {
    const uint32_t chunk = std::min(m_options.maxBatch, n - done);
    const bool lastChunk = done + chunk == n;
    if (!batch.allLogits && !lastChunk) {
      Logits scratch;
      scratch.values.resize(c.nVocab);
      KVS_TRY(forwardChunk(batch.tokens.subspan(done, chunk), false, scratch, 0));
    } else {
      KVS_TRY(forwardChunk(batch.tokens.subspan(done, chunk), batch.allLogits, out, batch.allLogits ? done : 0));
    }
    done += chunk;
  }
  if (indexed) readIndexerStep(m_rows, m_selectStep);
  return okStatus();
}

}  // namespace kvscope::backend
