// VulkanBackend::exportKv / importKv: the device pages in the canonical row
// order of a saved cache (kv/kv_cache.h), one (layer, part) block of a page
// [nHeadKv][pageRows][rowBytes] through the host at a time; exportKvTail /
// importKvTail: the precision tail's ring in kv::KvLayout::forEachTailRun's
// order, the whole ring through the host.

#include <algorithm>

#include "backend/vulkan_backend.h"

namespace kvscope::backend {
namespace {

// The canonical order of `rows` cached rows over blocks of one (layer, part)
// laid out page after page, [page][nHeadKv][pageRows][rowBytes] (one page: a
// ring): f(offset, bytes) per head and run of rows within a page.
template <typename F>
Status forEachRun(const kv::KvLayout& layout, uint32_t layer, kv::KvPart part, uint32_t rows,
                  F&& f) {
  const uint32_t perPage = layout.pageRows(layer);
  const uint32_t rowBytes = layout.rowBytes(layer, part);
  const size_t blockBytes = layout.partBytes(layer, part);
  const bool ring = layout.inRing(layer);
  for (uint32_t h = 0; h < layout.geometry().nHeadKv(layer); ++h) {
    for (uint32_t first = rows - layout.keptRows(layer, rows), count; first < rows;
         first += count) {
      count = std::min(perPage - first % perPage, rows - first);
      const size_t page = ring ? 0 : first / perPage;
      KVS_TRY(f(page * blockBytes + (size_t{h} * perPage + first % perPage) * rowBytes,
                size_t{count} * rowBytes));
    }
  }
  return okStatus();
}

}  // namespace

// Pages that hold `layer`'s first `rows` rows: the ring, or the growing pages.
size_t VulkanBackend::pagesHolding(uint32_t layer, uint32_t rows) const {
  if (rows == 0) return 0;
  return m_kvLayout.inRing(layer) ? 1 : m_kvLayout.pagesFor(rows);
}

Status VulkanBackend::exportKv(const std::function<Status(std::span<const uint8_t>)>& write) const {
  const kv::KvGeometry& g = m_kvLayout.geometry();
  const uint32_t rows = cachedTokens();
  std::vector<uint8_t> blocks;  // [page][nHeadKv][pageRows][rowBytes] of one (layer, part)
  for (uint32_t l = 0; l < g.nLayer(); ++l) {
    const size_t pages = pagesHolding(l, rows);
    for (kv::KvPart p : {kv::KvPart::kKey, kv::KvPart::kValue}) {
      const size_t blockBytes = m_kvLayout.partBytes(l, p);
      blocks.resize(blockBytes * pages);
      for (size_t page = 0; page < pages; ++page) {
        const gpu::Buffer& buffer = m_kvLayout.inRing(l) ? *m_ring : m_pages[page];
        KVS_TRY(
            buffer.download(&blocks[page * blockBytes], blockBytes, m_kvLayout.partOffset(l, p)));
      }
      KVS_TRY(forEachRun(m_kvLayout, l, p, rows, [&](size_t at, size_t bytes) {
        return write({&blocks[at], bytes});
      }));
    }
  }
  return okStatus();
}

Status VulkanBackend::importKv(const kv::KvLayout& layout, uint32_t rows,
                               const std::function<Status(std::span<uint8_t>)>& read) {
  if (cachedTokens() != 0)
    return makeError(ErrorCode::kInternal, "a KV cache is restored only into an empty one");
  m_experts.trim(0);  // the restored rows' picks were not saved: unknown
  if (!m_kvLayout.sameStreams(layout)) {
    // Two-phase, saved after the first decode step compressed the rows:
    // restored into the compressed schemes directly.
    const bool compressed = !m_pendingSchemes.empty() &&
                            layout.layerSchemes() == m_pendingSchemes &&
                            layout.cacheSeed() == m_kvLayout.cacheSeed();
    if (!compressed) {
      return makeError(ErrorCode::kInvalidArgument,
                       "the saved KV cache's schemes or seeds differ from this cache's");
    }
    KVS_ASSIGN_OR_RETURN(std::unique_ptr<VulkanBackend> next, backendFor(m_pendingSchemes));
    KVS_TRY(next->importKv(layout, rows, read));
    adoptCache(*next);
    m_pendingSchemes.clear();
    return okStatus();
  }
  if (rows > m_contextLimit) {
    return makeError(ErrorCode::kInvalidArgument,
                     "the saved KV cache holds {} tokens, the context limit is {}", rows,
                     m_contextLimit);
  }
  KVS_TRY(ensurePages(rows));
  const kv::KvGeometry& g = m_kvLayout.geometry();
  std::vector<uint8_t> blocks;
  const auto importAll = [&]() -> Status {
    for (uint32_t l = 0; l < g.nLayer(); ++l) {
      const size_t pages = pagesHolding(l, rows);
      for (kv::KvPart p : {kv::KvPart::kKey, kv::KvPart::kValue}) {
        const size_t blockBytes = m_kvLayout.partBytes(l, p);
        blocks.assign(blockBytes * pages, 0);
        KVS_TRY(forEachRun(m_kvLayout, l, p, rows, [&](size_t at, size_t bytes) {
          return read({&blocks[at], bytes});
        }));
        for (size_t page = 0; page < pages; ++page) {
          gpu::Buffer& buffer = m_kvLayout.inRing(l) ? *m_ring : m_pages[page];
          KVS_TRY(
              buffer.upload(&blocks[page * blockBytes], blockBytes, m_kvLayout.partOffset(l, p)));
        }
      }
    }
    if (m_index && rows > 0) KVS_TRY(rebuildSidecar(*m_index, rows));  // as setIndexer does
    return okStatus();
  };
  const Status status = importAll();
  if (!status.ok()) {
    m_pages.clear();
    m_pagePtrs.clear();
    m_ring.reset();
    m_ringPtr = nullptr;
    m_tail.reset();
    return status;
  }
  m_held.restored(rows);  // no tail until importKvTail
  return okStatus();
}

Status VulkanBackend::exportKvTail(
    const std::function<Status(std::span<const uint8_t>)>& write) const {
  const uint32_t held = kvTailHeld();
  if (held == 0) return okStatus();
  std::vector<uint8_t> ring(m_tail->size());
  KVS_TRY(m_tail->download(ring.data(), ring.size(), 0));
  return m_kvLayout.forEachTailRun(cachedTokens(), held, [&](size_t offset, size_t bytes) {
    return write({&ring[offset], bytes});
  });
}

Status VulkanBackend::importKvTail(uint32_t held,
                                   const std::function<Status(std::span<uint8_t>)>& read) {
  if (held == 0) return okStatus();
  const uint32_t rows = cachedTokens();
  KVS_TRY(m_held.checkTailImport(held));
  if (!m_tail)
    return makeError(ErrorCode::kInvalidArgument, "this KV cache keeps no precision tail");
  std::vector<uint8_t> ring(m_tail->size(), 0);
  KVS_TRY(m_kvLayout.forEachTailRun(rows, held, [&](size_t offset, size_t bytes) {
    return read({&ring[offset], bytes});
  }));
  KVS_TRY(m_tail->upload(ring.data(), ring.size(), 0));
  m_held.tailRestored(held);
  return okStatus();
}

}  // namespace kvscope::backend
