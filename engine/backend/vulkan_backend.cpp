#include "backend/vulkan_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/vulkan_step.h"
#include "kv/kv_index.h"

namespace kvscope::backend {
namespace {

// The cache layers the indexer covers: the global ones (a window layer
// attends its few rows whole).
std::vector<bool> indexedLayers(const model::ModelConfig& c) {
  std::vector<bool> layers;
  for (uint32_t l = 0; l < c.kvLayers(); ++l) layers.push_back(!c.isWindowLayer(l));
  return layers;
}

// Their head width (makeIndexer checks they share one); any layer's without one.
uint32_t indexedHeadDim(const model::ModelConfig& c) {
  for (uint32_t l = 0; l < c.kvLayers(); ++l)
    if (!c.isWindowLayer(l)) return c.headDimOf(l);
  return c.headDimOf(0);
}

}  // namespace

VulkanBackend::~VulkanBackend() = default;


std::vector<KernelTiming> VulkanBackend::kernelTimings() const {
  std::vector<KernelTiming> out;
  for (const auto& t : m_rec->kernelTimes())
    out.push_back({t.kernelClass, t.dispatches, t.gpuMs, t.bytes, t.flops});
  return out;
}

Status VulkanBackend::rebuildSidecar(const gpu::IndexerBuffers& index, uint32_t rows) {
  const auto& c = config();
  return m_rec->step([&]() -> Status {
    for (uint32_t l = 0; l < c.kvLayers(); ++l)
      if (index.indexes(l))  // window layers have no sidecar
        KVS_TRY(m_shared->attention().indexRows(*m_rec, m_layout, m_pagePtrs, index, l, 0, rows));
    return okStatus();
  });
}

uint32_t VulkanBackend::lastStepParts() const {
  return m_rec->partCount();
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
  const bool cpuDevice = b->m_shared->context().info().type == gpu::DeviceType::kCpu;
  const uint32_t submitEvery = options.submitEvery.value_or(cpuDevice ? 0 : kGpuSubmitEvery);
  KVS_ASSIGN_OR_RETURN(
      b->m_rec, gpu::Recorder::create(b->m_shared->context(), {.timing = options.timing,
                                                               .timingEvery = options.timingEvery,
                                                               .submitEvery = submitEvery}));
  b->m_contextLimit = options.contextLimit ? options.contextLimit : c.contextLength;
  KVS_ASSIGN_OR_RETURN(b->m_plan, model::planForward(c, b->m_shared->bound(), b->m_contextLimit));
  // Pages never move; their count is bounded by the page-array binding, so a
  // long context gets bigger pages rather than more of them.
  const uint32_t perPage = (b->m_contextLimit + gpu::AttentionKernels::kMaxPages - 1) / gpu::AttentionKernels::kMaxPages;
  const uint32_t rowsPerPage = std::max<uint32_t>(256, (perPage + 63) / 64 * 64);
  KVS_TRY(b->createKvLayout(rowsPerPage));
  // Two-phase: the rows start f16, once the policy's layout has been built
  // above (a scheme without a device codec, or a tail the device cannot
  // bind, is refused now; that layout's pipelines and buffers are made at
  // the first decode step).
  if (options.twoPhase && !options.kvSchemes.empty() &&
      options.kvSchemes != std::vector<kv::LayerSchemes>(c.kvLayers())) {
    b->m_twoPhase = options.kvSchemes;
    b->m_pendingSchemes = options.kvSchemes;
    b->m_options.kvSchemes.clear();
    KVS_TRY(b->createKvLayout(rowsPerPage));
  }
  // A GPU driver builds a pipeline at its first use: a reply's first step
  // past 64 rows would stall on the split passes (CPU devices build at
  // creation, and lavapipe's tests would pay for every variant).
  if (!cpuDevice) KVS_TRY(b->m_shared->attention().prepareDecode(b->m_layout, c.nHead));
  KVS_TRY(b->setIndexer(options.indexer));
  b->m_experts = ExpertLog::forModel(c, b->m_shared->bound());
  if (options.errorStride > 0) {
    b->m_errors = CodecErrorMeter(c.kvLayers());
    const size_t probeBytes = size_t{c.kvLayers()} * 2 * b->m_layout.widestKv() * sizeof(float);
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
  const std::vector<kv::LayerSchemes> f16(c.kvLayers());
  const std::vector<kv::LayerSchemes>& layers =
      m_options.kvSchemes.empty() ? f16 : m_options.kvSchemes;
  const kv::KvGeometry geometry =
      kvGeometry(c, rowsPerPage, m_contextLimit, m_options.maxBatch, m_options.kvTail);
  KVS_ASSIGN_OR_RETURN(m_kvLayout, kv::KvLayout::create(geometry, layers, m_options.kvSeed));
  m_held = kv::CachedRows(geometry);
  std::vector<gpu::KvHeads> heads;
  for (const kv::KvLayerShape& l : geometry.layers) heads.push_back({l.nHeadKv, l.headDim});
  m_layout = gpu::KvPageLayout::f16(std::move(heads), rowsPerPage);
  m_layout.ringRows = geometry.ringRows;
  m_layout.ring = geometry.windowLayers;
  m_layout.tailRows = geometry.tailRows;
  m_layout.tailSlots = geometry.tailRingRows;
  for (uint32_t l = 0; l < geometry.nLayer(); ++l) m_layout.tail.push_back(m_kvLayout.hasTail(l));
  m_rotations.clear();
  m_rotations.reserve(size_t{geometry.nLayer()} * 2);  // KvStream::rotation points into it
  for (uint32_t l = 0; l < geometry.nLayer(); ++l) {
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
  const gpu::KvPageLayout tail = m_layout.tailLayout();
  const auto tailAt = [&](uint32_t l, uint32_t part) {
    return tail.rowOffset(l, part, 1 % geometry.nHeadKv(l), 1 % geometry.tailRingRows) ==
           m_kvLayout.tailOffset(l, static_cast<kv::KvPart>(part), 1 % geometry.nHeadKv(l),
                                 1 % geometry.tailRingRows);
  };
  bool tailAlike = tail.ringPageBytes() == m_kvLayout.tailBytes();
  for (uint32_t l = 0; l < geometry.nLayer(); ++l)
    if (m_kvLayout.hasTail(l)) tailAlike = tailAlike && tailAt(l, 0) && tailAt(l, 1);
  if (m_layout.pageBytes() != m_kvLayout.pageBytes() ||
      m_layout.ringPageBytes() != m_kvLayout.ringPageBytes() || !tailAlike)
    return makeError(ErrorCode::kInternal, "the device KV pages differ from the KV layout");
  // The tail's ring is bound whole, as one page.
  const uint64_t range = m_shared->context().limits().maxStorageBufferRange;
  if (m_kvLayout.tailBytes() > range) {
    return makeError(ErrorCode::kUnsupported,
                     "a precision tail of {} rows takes {} bytes in one buffer; {} binds at most "
                     "{} (use a shorter tail)",
                     geometry.tailRows, m_kvLayout.tailBytes(), m_shared->context().info().name,
                     range);
  }
  return okStatus();
}

Expected<std::unique_ptr<VulkanBackend>> VulkanBackend::backendFor(
    const std::vector<kv::LayerSchemes>& schemes) const {
  VulkanBackendOptions options = m_options;
  options.contextLimit = m_contextLimit;
  options.kvSchemes = schemes;
  options.twoPhase = false;
  options.errorStride = 0;  // this backend measures the recoded rows
  options.indexer = m_indexer;
  return create(m_shared, options);
}

Status VulkanBackend::compressRows() {
  const auto& c = config();
  KVS_ASSIGN_OR_RETURN(std::unique_ptr<VulkanBackend> next, backendFor(m_pendingSchemes));
  const uint32_t rows = cachedTokens(), batch = m_options.maxBatch;
  KVS_TRY(next->ensureActivations(batch));
  KVS_TRY(next->ensurePages(rows));
  next->m_held.grow(rows);
  next->m_held.holdNoEarlierThan(m_held);
  next->m_held.tailRecoded(true);  // the tail's ring gets every row, from f16 rows
  // [batch][nHeadKv * headDim] floats of K and of V: the layout writeKv reads.
  const size_t staged = size_t{batch} * m_layout.widestKv() * sizeof(float);
  KVS_ASSIGN_OR_RETURN(gpu::Buffer k,
                       gpu::Buffer::create(m_shared->context(), staged, gpu::MemoryUse::kHost));
  KVS_ASSIGN_OR_RETURN(gpu::Buffer v,
                       gpu::Buffer::create(m_shared->context(), staged, gpu::MemoryUse::kHost));
  const uint32_t stride = m_options.errorStride;
  CodecErrorMeter measured = m_errors;  // replaces m_errors once every row is recoded
  measured.reset();
  for (uint32_t l = 0; l < c.kvLayers(); ++l) {
    KVS_ASSIGN_OR_RETURN(const std::vector<float> keys, readKv(l, kv::KvPart::kKey));
    KVS_ASSIGN_OR_RETURN(const std::vector<float> values, readKv(l, kv::KvPart::kValue));
    const uint32_t first = m_kvLayout.isWindow(l) ? m_held.windowStart() : 0;
    const uint32_t d = c.headDimOf(l), width = c.headsKvOf(l) * d;
    for (uint32_t r0 = first, n; r0 < rows; r0 += n) {
      n = std::min(batch, rows - r0);
      const size_t at = size_t{r0 - first} * width, bytes = size_t{n} * width * sizeof(float);
      KVS_TRY(k.upload(&keys[at], bytes));
      KVS_TRY(v.upload(&values[at], bytes));
      KVS_TRY(next->m_rec->step([&] {
        return m_shared->attention().writeKv(*next->m_rec, next->m_layout, next->pagesOf(l), l, k,
                                             v, n, r0, next->m_act->scratch, nullptr,
                                             next->tailRing());
      }));
    }
    // The codec error of the rows as now stored, at the sampled positions
    // the layer still holds, against the f16 rows they came from.
    const uint32_t sampled = stride > 0 ? (first + stride - 1) / stride * stride : rows;
    for (uint32_t r = sampled; r < rows; r += stride) {
      for (uint32_t h = 0; h < c.headsKvOf(l); ++h) {
        const size_t at = size_t{r - first} * width + size_t{h} * d;
        measured.measure(l, kv::KvPart::kKey, next->m_kvLayout.scheme(l, kv::KvPart::kKey),
                         {&keys[at], d});
        measured.measure(l, kv::KvPart::kValue, next->m_kvLayout.scheme(l, kv::KvPart::kValue),
                         {&values[at], d});
      }
    }
  }
  if (next->m_index && rows > 0) KVS_TRY(next->rebuildSidecar(*next->m_index, rows));
  adoptCache(*next);
  m_errors = std::move(measured);
  m_pendingSchemes.clear();
  return okStatus();
}

void VulkanBackend::adoptCache(VulkanBackend& next) {
  std::swap(m_kvLayout, next.m_kvLayout);
  std::swap(m_layout, next.m_layout);
  std::swap(m_rotations, next.m_rotations);  // m_layout's streams point into it
  std::swap(m_pages, next.m_pages);
  std::swap(m_pagePtrs, next.m_pagePtrs);
  std::swap(m_ring, next.m_ring);
  std::swap(m_tail, next.m_tail);
  std::swap(m_held, next.m_held);
  std::swap(m_act, next.m_act);  // the attention scratch is sized for the layout
  std::swap(m_slots, next.m_slots);
  std::swap(m_index, next.m_index);
  std::swap(m_selection, next.m_selection);  // it covers the tail the layout keeps
  std::swap(m_options.kvSchemes, next.m_options.kvSchemes);
  // The rings' buffers changed optionals: point at them where they are now.
  m_ringPtr = m_ring ? &*m_ring : nullptr;
  next.m_ringPtr = next.m_ring ? &*next.m_ring : nullptr;
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
  KVS_TRY(make(a->logits, size_t{n} * c.nVocab, gpu::MemoryUse::kHost));
  KVS_ASSIGN_OR_RETURN(a->scratch, m_shared->attention().makeScratch(m_layout, c.nHead, n, m_contextLimit));
  if (c.nExpert > 0)
    KVS_TRY(make(a->expertIds, size_t{c.nLayer} * n * c.nExpertUsed, gpu::MemoryUse::kHost));
  m_act = std::move(a);
  m_slots = {};  // the description's buffers are remade at the new capacity
  return okStatus();
}

Status VulkanBackend::ensurePages(uint32_t rows) {
  while (m_pages.size() * m_layout.rowsPerPage < rows) {
    KVS_ASSIGN_OR_RETURN(auto page, gpu::Buffer::create(m_shared->context(), m_layout.pageBytes()));
    m_pages.push_back(std::move(page));
  }
  m_pagePtrs.clear();
  for (const auto& p : m_pages) m_pagePtrs.push_back(&p);
  if (!m_ring && rows > 0 && m_layout.ringPageBytes() > 0) {
    KVS_ASSIGN_OR_RETURN(auto ring,
                         gpu::Buffer::create(m_shared->context(), m_layout.ringPageBytes()));
    m_ring = std::move(ring);
    m_ringPtr = &*m_ring;
  }
  if (!m_tail && rows > 0 && m_kvLayout.tailBytes() > 0) {
    KVS_ASSIGN_OR_RETURN(auto tail,
                         gpu::Buffer::create(m_shared->context(), m_kvLayout.tailBytes()));
    m_tail = std::move(tail);
  }
  return okStatus();
}

std::span<const gpu::Buffer* const> VulkanBackend::pagesOf(uint32_t layer) const {
  if (m_layout.inRing(layer)) return {&m_ringPtr, 1};
  return m_pagePtrs;
}

Status VulkanBackend::trim(uint32_t n) {
  KVS_TRY(m_held.trim(n));
  if (n == 0) {
    m_ring.reset();
    m_ringPtr = nullptr;
    m_tail.reset();
  }
  m_experts.trim(n);
  // The sidecar needs nothing: the next write rebuilds its partial page.
  if (n < m_indexerStep.rows) m_indexerStep = {};  // it described rows that are gone
  const size_t keep = (size_t{n} + m_layout.rowsPerPage - 1) / m_layout.rowsPerPage;
  if (m_pages.size() > keep) {
    m_pages.resize(keep);
    KVS_TRY(ensurePages(n));
  }
  if (n == 0 && !m_twoPhase.empty() && m_pendingSchemes.empty()) {
    // An emptied two-phase cache prefills at f16 again; where no f16 cache
    // can be made (out of device memory), the empty compressed one stays.
    if (auto f16 = backendFor({}); f16.ok()) {
      adoptCache(**f16);
      m_pendingSchemes = m_twoPhase;
      m_errors.reset();  // the next rows are f16 ones again
    }
  }
  return okStatus();
}

Status VulkanBackend::setIndexer(const kv::IndexerOptions& options) {
  KVS_TRY(checkIndexerFor(config(), options));
  const auto& c = config();
  std::unique_ptr<gpu::IndexerBuffers> index;
  const kv::IndexerOptions selection = kv::selectionOptions(options, m_kvLayout.keptTailRows());
  if (options.enabled()) {
    const gpu::IndexerShape shape{.pageRows = options.pageRows,
                                  .meanStd = options.pageScore == kv::PageScore::kMeanStd,
                                  .sinks = options.sinks,
                                  .window = selection.window,
                                  .pickedPages = kv::pickedPages(options),
                                  .entryBytes = kv::KvIndex::entryBytesFor(indexedHeadDim(c)),
                                  .diagnostic = options.diagnostic,
                                  .layers = indexedLayers(c)};
    KVS_ASSIGN_OR_RETURN(auto buffers,
                         m_shared->attention().makeIndexer(m_layout, c.nHead, m_contextLimit, shape));
    index = std::make_unique<gpu::IndexerBuffers>(std::move(buffers));
    if (m_index && m_index->shape.pageRows == options.pageRows &&
        m_index->shape.meanStd == shape.meanStd) {
      // Same pages: the sidecar kept so far stays valid (a new budget, window
      // or the diagnostic switch need no rebuild).
      index->sidecar = std::move(m_index->sidecar);
    } else if (cachedTokens() > 0) {  // the sidecar of the rows cached so far
      KVS_TRY(rebuildSidecar(*index, cachedTokens()));
    }
  }
  m_indexer = options;
  m_selection = selection;
  m_denseHeads.assign(c.kvLayers(), {});
  for (const kv::KvHeadRef& h : options.denseHeads) m_denseHeads[h.layer].push_back(h.head);
  m_index = std::move(index);
  if (!options.enabled()) m_indexerStep = {};
  return okStatus();
}

void VulkanBackend::readIndexerStep(uint32_t rows, bool selected) {
  const auto& c = config();
  m_indexerStep.rows = rows;
  m_indexerStep.layers.assign(c.kvLayers(), {});
  const gpu::IndexerBuffers& ix = *m_index;
  const auto* lists = static_cast<const uint32_t*>(ix.lists.mapped());
  for (uint32_t l = 0; l < c.kvLayers(); ++l) {
    IndexerLayerStep& step = m_indexerStep.layers[l];
    step.heads.resize(c.headsKvOf(l));
    // A window layer attends its window whole, as do the first layers; their
    // lists were not written.
    if (!selected || !ix.indexes(l) || !m_indexer.selects(l)) {
      step.setMass(std::vector<double>(m_indexer.diagnostic ? c.headsKvOf(l) : 0, 1.0));
      continue;
    }
    for (uint32_t h = 0; h < c.headsKvOf(l); ++h) {
      if (!m_indexer.selectsHead(l, h)) continue;  // a dense head: every row
      const uint32_t* list = lists + ix.listAt(l, h);
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
    const size_t slot = ix.slots[l];
    const auto* dense = reinterpret_cast<const float*>(mass + ix.massStride * (slot * 2));
    const auto* picked = reinterpret_cast<const float*>(mass + ix.massStride * (slot * 2 + 1));
    const uint32_t gqa = c.nHead / c.headsKvOf(l);
    std::vector<double> perKvHead(c.headsKvOf(l), 0.0);
    for (uint32_t h = 0; h < c.nHead; ++h) {
      const double sum = dense[2 * h + 1];
      // A head without a positive dense sum counts as whole, as on the CPU,
      // and so does a dense head.
      const double share =
          sum > 0.0 && m_indexer.selectsHead(l, h / gqa)
              ? picked[2 * h + 1] * std::exp(double{picked[2 * h]} - dense[2 * h]) / sum
              : 1.0;
      perKvHead[h / gqa] += share / gqa;
    }
    step.setMass(std::move(perKvHead));
  }
}

std::vector<KvLayerBytes> VulkanBackend::kvBytes() const {
  const auto& c = config();
  const uint32_t rows = cachedTokens();
  const uint64_t capacity = uint64_t{m_layout.rowsPerPage} * m_pages.size();
  // The sidecar's entries of the indexed pages, counted with K (as kv::KvIndex
  // does): the global layers'.
  const uint64_t sidecar = m_index ? uint64_t{m_index->heads.nHeadKv} *
                                         ((rows + m_indexer.pageRows - 1) / m_indexer.pageRows) *
                                         m_index->shape.entryBytes
                                   : 0;
  std::vector<KvLayerBytes> layers;
  for (uint32_t l = 0; l < c.kvLayers(); ++l) {
    const bool window = m_kvLayout.isWindow(l), ring = m_kvLayout.inRing(l);
    const uint32_t held = rows - (window ? m_held.windowStart() : 0);
    const uint64_t room = ring ? (m_ring ? m_kvLayout.geometry().ringRows : 0) : capacity;
    kv::KvBytes key = m_kvLayout.bytes(l, kv::KvPart::kKey, held, room);
    kv::KvBytes value = m_kvLayout.bytes(l, kv::KvPart::kValue, held, room);
    key.sidecar = m_index && m_index->indexes(l) ? sidecar : 0;
    if (m_tail) {
      for (kv::KvBytes* b : {&key, &value})
        m_kvLayout.addTailBytes(*b, l, std::min(kvTailHeld(), held));
    }
    layers.push_back({.key = &m_kvLayout.scheme(l, kv::KvPart::kKey),
                      .value = &m_kvLayout.scheme(l, kv::KvPart::kValue),
                      .keyBytes = key,
                      .valueBytes = value,
                      .rows = held,
                      .window = window ? c.slidingWindow : 0,
                      .ring = ring});
  }
  return layers;
}

// The probed token's K and V rows, every layer and KV head, through the CPU
// schemes the pages are encoded with.
void VulkanBackend::measureProbe() {
  const auto& c = config();
  const auto* rows = static_cast<const float*>(m_probe.mapped());
  for (uint32_t l = 0; l < c.kvLayers(); ++l) {
    const uint32_t d = c.headDimOf(l);
    for (uint32_t part = 0; part < 2; ++part) {
      const float* stream = rows + (size_t{l} * 2 + part) * m_layout.widestKv();
      for (uint32_t h = 0; h < c.headsKvOf(l); ++h) {
        m_errors.measure(l, static_cast<kv::KvPart>(part),
                         m_kvLayout.scheme(l, static_cast<kv::KvPart>(part)),
                         {stream + size_t{h} * d, d});
      }
    }
  }
}

std::vector<KvLayerError> VulkanBackend::kvErrors() const {
  std::vector<KvLayerError> layers;
  if (m_options.errorStride == 0) return layers;
  for (uint32_t l = 0; l < config().kvLayers(); ++l)
    layers.push_back({m_errors.error(l, kv::KvPart::kKey), m_errors.error(l, kv::KvPart::kValue)});
  return layers;
}

Expected<std::vector<float>> VulkanBackend::readKv(uint32_t layer, kv::KvPart part) const {
  const auto& c = config();
  if (layer >= c.kvLayers()) {
    return makeError(ErrorCode::kInvalidArgument, "layer {} of a cache of {} layers", layer,
                     c.kvLayers());
  }
  const uint32_t heads = c.headsKvOf(layer), d = c.headDimOf(layer);
  const kv::KvScheme& scheme = m_kvLayout.scheme(layer, part);
  const uint32_t rowBytes = m_kvLayout.rowBytes(layer, part);
  const uint32_t perPage = m_kvLayout.pageRows(layer), end = cachedTokens();
  const uint32_t first = m_kvLayout.isWindow(layer) ? m_held.windowStart() : 0;
  std::vector<float> rows(size_t{end - first} * heads * d);
  std::vector<uint8_t> block(m_kvLayout.partBytes(layer, part));
  for (uint32_t r0 = first, count; r0 < end; r0 += count) {
    count = std::min(perPage - r0 % perPage, end - r0);
    const gpu::Buffer& page = m_kvLayout.inRing(layer) ? *m_ring : m_pages[r0 / perPage];
    KVS_TRY(page.download(block.data(), block.size(), m_kvLayout.partOffset(layer, part)));
    for (uint32_t h = 0; h < heads; ++h) {
      for (uint32_t r = r0; r < r0 + count; ++r) {
        const size_t at = (size_t{h} * perPage + r % perPage) * rowBytes;
        scheme.decode({&block[at], rowBytes}, {&rows[(size_t{r - first} * heads + h) * d], d});
      }
    }
  }
  return rows;
}

Status VulkanBackend::forwardChunk(std::span<const int32_t> tokens, bool allLogits, Logits& out,
                                   uint32_t row0, const Description& describe, bool lastChunk) {
  const auto& c = config();
  const auto n = static_cast<uint32_t>(tokens.size());
  const uint32_t pos0 = cachedTokens();
  KVS_TRY(m_held.checkStep(n));
  KVS_TRY(ensureActivations(std::min(m_options.maxBatch, std::max<uint32_t>(n, 1))));
  KVS_TRY(ensurePages(pos0 + n));
  // The last position p of this chunk with p % errorStride == 0, if any.
  const uint32_t stride = m_options.errorStride;
  m_probeRow = -1;
  if (stride > 0) {
    const uint32_t last = pos0 + n - 1, sampled = last - last % stride;
    if (sampled >= pos0) m_probeRow = sampled - pos0;
  }
  m_slots.retired.clear();  // the previous step has run
  VulkanStep step(*this, tokens, pos0, allLogits, lastChunk);
  // The pages hold the chunk's rows once it ran, whatever the dump does; a
  // ring overwrites its oldest rows as soon as the step writes.
  m_held.grow(pos0 + n);
  if (const Status run = m_rec->step([&] { return describe(m_plan, step); }); !run.ok()) {
    (void)trim(pos0);
    return run;
  }
  if (m_probeRow >= 0) measureProbe();
  if (m_experts.enabled()) {
    // This step's picks only, [nLayer][n, nUsed]; download() invalidates a
    // non-coherent host mapping before it reads.
    const uint32_t used = c.nExpertUsed;
    std::vector<uint32_t> picks(size_t{c.nLayer} * n * used);
    KVS_TRY(m_act->expertIds.download(std::span<uint32_t>(picks)));
    for (uint32_t l = 0; l < c.nLayer; ++l) {
      if (!m_shared->bound().layers[l].gateInp) continue;  // a dense layer
      for (uint32_t t = 0; t < n; ++t)
        m_experts.record(l, pos0 + t, std::span(picks).subspan((size_t{l} * n + t) * used, used));
    }
  }
  KVS_TRY(step.collectDump());
  const uint32_t rows = allLogits ? n : 1;
  return m_act->logits.download(out.values.data() + size_t{row0} * c.nVocab, size_t{rows} * c.nVocab * sizeof(float));
}

Status VulkanBackend::forwardWith(const Batch& batch, Logits& out, const Description& describe) {
  const auto& c = config();
  const auto n = static_cast<uint32_t>(batch.tokens.size());
  if (n == 0) return makeError(ErrorCode::kInvalidArgument, "empty batch");
  const uint32_t pos0 = cachedTokens();
  if (uint64_t{pos0} + n > m_contextLimit) {
    return makeError(ErrorCode::kInvalidArgument,
                     "the context is full: {} cached + {} new tokens exceed the limit of {}", pos0,
                     n, m_contextLimit);
  }
  for (int32_t tok : batch.tokens) {
    if (tok < 0 || static_cast<uint32_t>(tok) >= c.nVocab) {
      return makeError(ErrorCode::kInvalidArgument, "token id {} is outside the vocabulary of {}", tok, c.nVocab);
    }
  }
  if (!m_pendingSchemes.empty() && isDecodeStep(batch, pos0)) KVS_TRY(compressRows());
  // A decode step with the indexer on attends the rows it selects, unless
  // they would be every row.
  const bool indexed = m_indexer.enabled() && n == 1;
  m_selectStep = indexed && !kv::selectsAll(m_selection, pos0 + 1);
  out.vocab = c.nVocab;
  out.rows = batch.allLogits ? n : 1;
  out.values.resize(size_t{out.rows} * c.nVocab);
  // Batches larger than the activation buffers run in chunks; only the last
  // chunk's final row matters unless every row's logits are wanted.
  for (uint32_t done = 0; done < n;) {
    const uint32_t chunk = std::min(m_options.maxBatch, n - done);
    const bool lastChunk = done + chunk == n;
    Status run;
    if (!batch.allLogits && !lastChunk) {
      Logits scratch;
      scratch.values.resize(c.nVocab);
      run = forwardChunk(batch.tokens.subspan(done, chunk), false, scratch, 0, describe, false);
    } else {
      run = forwardChunk(batch.tokens.subspan(done, chunk), batch.allLogits, out,
                         batch.allLogits ? done : 0, describe, lastChunk);
    }
    if (!run.ok()) {
      // The earlier chunks' rows go too, as far as the window layers allow.
      if (!trim(pos0).ok()) (void)trim(0);
      return run;
    }
    done += chunk;
  }
  if (indexed) readIndexerStep(cachedTokens(), m_selectStep);
  return okStatus();
}

}  // namespace kvscope::backend
