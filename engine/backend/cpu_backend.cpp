#include "backend/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu_matmul.h"
#include "backend/cpu_quant_decode.h"
#include "backend/cpu_step.h"
#include "core/prefault.h"
#include "gguf/dequant.h"
#include "model/description.h"

namespace kvscope::backend {

using kv::KvPart;

namespace {

// Products decode F32, F16, BF16 and the block types cpu_quant_decode.h
// knows; embedding rows and vectors go through gguf::dequantize.
bool cpuDecodes(gguf::TensorType type, model::WeightRole role) {
  if (role != model::WeightRole::kMatrix) return gguf::canDequantize(type);
  using gguf::TensorType;
  return type == TensorType::kF32 || type == TensorType::kF16 || type == TensorType::kBF16 ||
         cpu::canDecodeRow(type);
}

}  // namespace

Status CpuBackend::checkRuns(const model::ModelFile& model) {
  const model::ModelConfig& c = model.config();
  KVS_ASSIGN_OR_RETURN(const model::ModelWeights bound, model::bindWeights(c, model));
  KVS_TRY(model::checkWeightTypes(bound, "CPU", cpuDecodes));
  KVS_TRY(model::planForward(c, bound, c.contextLength));
  return okStatus();
}

Expected<std::unique_ptr<CpuBackend>> CpuBackend::create(
    std::shared_ptr<const model::ModelFile> model, const CpuBackendOptions& options) {
  std::unique_ptr<CpuBackend> b(new CpuBackend());
  const auto& c = model->config();
  KVS_ASSIGN_OR_RETURN(b->m_weights, model::bindWeights(c, *model));
  KVS_TRY(model::checkWeightTypes(b->m_weights, "CPU", cpuDecodes));
  const std::vector<kv::LayerSchemes> f16(c.kvLayers());
  const std::vector<kv::LayerSchemes>& schemes =
      options.kvSchemes.empty() ? f16 : options.kvSchemes;
  b->m_contextLimit = options.contextLimit ? options.contextLimit : c.contextLength;
  if (options.stepRows == 0)
    return makeError(ErrorCode::kInvalidArgument, "a forward step needs at least one row");
  b->m_stepRows = options.stepRows;
  const kv::KvGeometry geometry = kvGeometry(c, kv::KvGeometry{}.rowsPerPage, b->m_contextLimit,
                                             options.stepRows, options.kvTail);
  // Built even when two-phase defers it, so a bad scheme fails here.
  KVS_ASSIGN_OR_RETURN(b->m_cache, kv::KvCache::create(geometry, schemes, options.kvSeed));
  if (options.twoPhase && schemes != f16) {
    b->m_twoPhase = schemes;
    b->m_pendingSchemes = schemes;
    KVS_ASSIGN_OR_RETURN(b->m_cache, kv::KvCache::create(geometry, f16, options.kvSeed));
  }
  b->m_errors = CodecErrorMeter(c.kvLayers());
  b->m_pool = std::make_unique<ThreadPool>(options.threads);
  b->m_matmul = options.matmul;
  b->m_errorStride = options.errorStride;
  KVS_ASSIGN_OR_RETURN(b->m_plan, model::planForward(c, b->m_weights, b->m_contextLimit));
  model::forEachWeight(b->m_weights, [&](const model::TensorView& t, model::WeightRole role) {
    if (role != model::WeightRole::kVector) return;
    b->m_vectors.emplace(&t, cpu::dequantizeVector(t));
  });
  // The weights' pages mapped now rather than faulted in by the first steps
  // (core/prefault.h; a tied output's second pass finds its pages mapped).
  if (worthPrefaulting(model->weightBytes())) {
    model::forEachWeight(b->m_weights, [](const model::TensorView& t, model::WeightRole) {
      prefaultForRead(t.data);
    });
  }
  b->m_experts = ExpertLog::forModel(c, b->m_weights);
  for (const model::LayerWeights& l : b->m_weights.layers) {
    for (const model::TensorView* stack : {l.gateExps, l.upExps, l.downExps}) {
      if (!stack) continue;
      std::vector<model::TensorView>& views = b->m_experts2d[stack];
      for (uint32_t e = 0; e < c.nExpert; ++e) views.push_back(model::expertMatrix(*stack, e));
    }
    if (l.gateUpExps) {  // each expert's gate rows, then its up rows
      std::vector<model::TensorView>& views = b->m_experts2d[l.gateUpExps];
      for (uint32_t e = 0; e < c.nExpert; ++e) {
        const model::TensorView both = model::expertMatrix(*l.gateUpExps, e);
        for (const uint32_t half : {0u, 1u}) {
          KVS_ASSIGN_OR_RETURN(model::TensorView v, model::rowRange(both, uint64_t{half} * c.nFfExp,
                                                                    c.nFfExp, both.name));
          views.push_back(std::move(v));
        }
      }
    }
  }
  b->m_model = std::move(model);
  KVS_TRY(b->setIndexer(options.indexer));  // checked against config(): the model's
  return b;
}

Status CpuBackend::forwardWith(const Batch& batch, Logits& out, const Description& describe) {
  const auto& c = config();
  const auto n = static_cast<uint32_t>(batch.tokens.size());
  const uint32_t pos0 = m_cache->rows();
  if (n == 0) return makeError(ErrorCode::kInvalidArgument, "empty batch");
  if (uint64_t{pos0} + n > m_contextLimit) {
    return makeError(ErrorCode::kInvalidArgument,
                     "the context is full: {} cached + {} new tokens exceed the limit of {}", pos0,
                     n, m_contextLimit);
  }
  for (int32_t tok : batch.tokens) {
    if (tok < 0 || static_cast<uint32_t>(tok) >= c.nVocab) {
      return makeError(ErrorCode::kInvalidArgument, "token id {} is outside the vocabulary of {}",
                       tok, c.nVocab);
    }
  }
  if (!m_pendingSchemes.empty() && isDecodeStep(batch, pos0)) KVS_TRY(compressRows());
  if (n <= m_stepRows) return step(batch, out, describe);
  out = {.values = {}, .rows = 0, .vocab = c.nVocab};
  Logits chunk;
  for (uint32_t done = 0; done < n; done += m_stepRows) {
    const uint32_t take = std::min(m_stepRows, n - done);
    const Status run = step({batch.tokens.subspan(done, take), batch.allLogits}, chunk, describe);
    if (!run.ok()) {
      // The earlier steps' rows go too, as far as the window layers allow.
      if (!trim(pos0).ok()) (void)trim(0);
      return run;
    }
    if (batch.allLogits) {
      out.values.insert(out.values.end(), chunk.values.begin(), chunk.values.end());
      out.rows += chunk.rows;
    } else {
      out = std::move(chunk);  // only the last step's last row is wanted
    }
  }
  return okStatus();
}

// One step of at most stepRows tokens, checked by forwardWith.
Status CpuBackend::step(const Batch& batch, Logits& out, const Description& describe) {
  const auto& c = config();
  const auto n = static_cast<uint32_t>(batch.tokens.size());
  const uint32_t pos0 = m_cache->rows();
  KVS_TRY(m_cache->append(n));
  if (m_indexer.enabled() && n == 1) {
    m_indexerStep.rows = pos0 + 1;
    m_indexerStep.layers.resize(c.kvLayers());
  }
  CpuStep step(*this, batch.tokens, pos0, batch.allLogits, out);
  const Status run = describe(m_plan, step);
  // The rows (and indexer step) of a step that did not run; the ring may
  // have overwritten rows pos0 needs.
  if (!run.ok() && !trim(pos0).ok()) (void)trim(0);
  return run;
}

Status CpuBackend::compressRows() {
  KVS_ASSIGN_OR_RETURN(auto compressed, kv::KvCache::create(m_cache->geometry(), m_pendingSchemes,
                                                            m_cache->cacheSeed()));
  compressed->enableIndex(m_indexer);
  KVS_TRY(compressed->appendRecoded(*m_cache));
  measureRecoded(*m_cache, *compressed);
  m_cache = std::move(compressed);
  refreshSelection();
  m_pendingSchemes.clear();
  return okStatus();
}

// Encodes one row into the cache and, on sampled positions, measures what the
// codec lost on it.
void CpuBackend::store(uint32_t layer, KvPart part, uint32_t head, uint32_t index,
                       std::span<const float> row) {
  m_cache->write(layer, part, head, index, row);
  if (m_errorStride == 0 || index % m_errorStride != 0) return;
  m_decoded.resize(row.size());
  m_cache->read(layer, part, head, index, m_decoded);
  m_errors.add(layer, part, row, m_decoded);
}

Status CpuBackend::trim(uint32_t n) {
  KVS_TRY(m_cache->trim(n));
  if (n < m_indexerStep.rows) m_indexerStep = {};  // it described rows that are gone
  m_experts.trim(n);
  if (n == 0 && !m_twoPhase.empty() && m_pendingSchemes.empty()) {
    // An emptied two-phase cache prefills at f16 again; where no f16 cache
    // can be made, the empty compressed one stays (the rows go either way).
    auto f16 =
        kv::KvCache::create(m_cache->geometry(), std::vector<kv::LayerSchemes>(config().kvLayers()),
                            m_cache->cacheSeed());
    if (f16.ok()) {
      (*f16)->enableIndex(m_indexer);
      m_cache = std::move(f16).value();
      refreshSelection();
      m_pendingSchemes = m_twoPhase;
      m_errors.reset();  // the next rows are f16 ones again
    }
  }
  return okStatus();
}

Status CpuBackend::exportKv(const std::function<Status(std::span<const uint8_t>)>& write) const {
  return m_cache->exportRows(write);
}

Status CpuBackend::importKv(const kv::KvLayout& layout, uint32_t rows,
                            const std::function<Status(std::span<uint8_t>)>& read) {
  if (m_cache->rows() != 0)
    return makeError(ErrorCode::kInternal, "a KV cache is restored only into an empty one");
  m_experts.trim(0);  // the restored rows' picks were not saved: unknown
  if (rows > m_contextLimit) {
    return makeError(ErrorCode::kInvalidArgument,
                     "the saved KV cache holds {} tokens, the context limit is {}", rows,
                     m_contextLimit);
  }
  std::unique_ptr<kv::KvCache> target;
  if (!m_cache->layout().sameStreams(layout)) {
    // Two-phase, saved after the first decode compressed the rows: restore
    // into the compressed schemes directly.
    const bool compressed = !m_pendingSchemes.empty() &&
                            layout.layerSchemes() == m_pendingSchemes &&
                            layout.cacheSeed() == m_cache->cacheSeed();
    if (!compressed) {
      return makeError(ErrorCode::kInvalidArgument,
                       "the saved KV cache's schemes or seeds differ from this cache's");
    }
    KVS_ASSIGN_OR_RETURN(target, kv::KvCache::create(m_cache->geometry(), m_pendingSchemes,
                                                     m_cache->cacheSeed()));
    target->enableIndex(m_indexer);
  }
  kv::KvCache& cache = target ? *target : *m_cache;
  KVS_TRY(cache.importRows(rows, read));
  if (target) {
    m_cache = std::move(target);
    refreshSelection();
    m_pendingSchemes.clear();
  }
  return okStatus();
}

// The selection's options for the cache as it is now: a two-phase cache
// keeps its tail from its first compression on.
void CpuBackend::refreshSelection() {
  m_selection = kv::selectionOptions(m_indexer, m_cache->layout().keptTailRows());
}

Status CpuBackend::setIndexer(const kv::IndexerOptions& options) {
  KVS_TRY(checkIndexerFor(config(), options));
  m_indexer = options;
  refreshSelection();
  m_cache->enableIndex(options);
  if (!options.enabled()) m_indexerStep = {};
  return okStatus();
}

std::vector<KvLayerBytes> CpuBackend::kvBytes() const {
  std::vector<KvLayerBytes> layers;
  for (uint32_t l = 0; l < config().kvLayers(); ++l) {
    layers.push_back({.key = &m_cache->scheme(l, KvPart::kKey),
                      .value = &m_cache->scheme(l, KvPart::kValue),
                      .keyBytes = m_cache->layerBytes(l, KvPart::kKey),
                      .valueBytes = m_cache->layerBytes(l, KvPart::kValue),
                      .rows = m_cache->rows() - m_cache->firstRow(l),
                      .window = m_cache->layout().isWindow(l) ? m_cache->geometry().window : 0,
                      .ring = m_cache->layout().inRing(l)});
  }
  return layers;
}

std::vector<KvLayerError> CpuBackend::kvErrors() const {
  std::vector<KvLayerError> layers;
  if (m_errorStride == 0) return layers;  // not measured
  for (uint32_t l = 0; l < config().kvLayers(); ++l)
    layers.push_back({m_errors.error(l, KvPart::kKey), m_errors.error(l, KvPart::kValue)});
  return layers;
}

// The recoded rows' error against the f16 rows they came from, which replace
// the originals once two-phase caching has compressed them.
void CpuBackend::measureRecoded(const kv::KvCache& f16, const kv::KvCache& recoded) {
  const kv::KvGeometry& g = f16.geometry();
  std::vector<float> x, decoded;
  m_errors.reset();
  for (uint32_t l = 0; m_errorStride > 0 && l < g.nLayer(); ++l) {
    x.resize(g.headDim(l));
    decoded.resize(g.headDim(l));
    // The sampled positions the layer still holds.
    const uint32_t first =
        (recoded.firstRow(l) + m_errorStride - 1) / m_errorStride * m_errorStride;
    for (KvPart part : {KvPart::kKey, KvPart::kValue}) {
      for (uint32_t h = 0; h < g.nHeadKv(l); ++h) {
        for (uint32_t i = first; i < f16.rows(); i += m_errorStride) {
          f16.read(l, part, h, i, x);
          recoded.read(l, part, h, i, decoded);
          m_errors.add(l, part, x, decoded);
        }
      }
    }
  }
}

Expected<std::vector<float>> CpuBackend::readKv(uint32_t layer, kv::KvPart part) const {
  const auto& c = config();
  if (layer >= c.kvLayers()) {
    return makeError(ErrorCode::kInvalidArgument, "layer {} of a cache of {} layers", layer,
                     c.kvLayers());
  }
  const uint32_t first = m_cache->firstRow(layer);
  const uint32_t heads = m_cache->geometry().nHeadKv(layer), d = m_cache->geometry().headDim(layer);
  std::vector<float> rows(size_t{m_cache->rows() - first} * heads * d);
  for (uint32_t i = first; i < m_cache->rows(); ++i) {
    for (uint32_t h = 0; h < heads; ++h)
      m_cache->read(layer, part, h, i, {&rows[(size_t{i - first} * heads + h) * d], d});
  }
  return rows;
}

}  // namespace kvscope::backend
