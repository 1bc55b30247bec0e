// VulkanBackend::exportKv / importKv: the device pages in the canonical row
// order of a saved cache (kv/kv_cache.h), one (layer, part) block of a page
// [nHeadKv][R][rowBytes] through the host at a time.

#include <algorithm>

#include "backend/vulkan_backend.h"

namespace kvscope::backend {
namespace {

// The canonical order over blocks of one (layer, part) laid out page after
// page, [page][nHeadKv][R][rowBytes]: f(offset, bytes) per head and page.
template <typename F>
Status forEachRun(const kv::KvLayout& layout, uint32_t layer, kv::KvPart part, uint32_t rows,
                  F&& f) {
  const uint32_t perPage = layout.geometry().rowsPerPage;
  const uint32_t rowBytes = layout.rowBytes(layer, part);
  const size_t blockBytes = layout.partBytes(layer, part);
  for (uint32_t h = 0; h < layout.geometry().nHeadKv; ++h) {
    for (uint32_t first = 0; first < rows; first += perPage) {
      const uint32_t count = std::min(perPage, rows - first);
      KVS_TRY(f((first / perPage) * blockBytes + size_t{h} * perPage * rowBytes,
                size_t{count} * rowBytes));
    }
  }
  return okStatus();
}

}  // namespace

Status VulkanBackend::exportKv(const std::function<Status(std::span<const uint8_t>)>& write) const {
  const kv::KvGeometry& g = m_kvLayout.geometry();
  const size_t pages = m_kvLayout.pagesFor(m_rows);
  std::vector<uint8_t> blocks;  // [page][nHeadKv][R][rowBytes] of one (layer, part)
  for (uint32_t l = 0; l < g.nLayer; ++l) {
    for (kv::KvPart p : {kv::KvPart::kKey, kv::KvPart::kValue}) {
      const size_t blockBytes = m_kvLayout.partBytes(l, p);
      blocks.resize(blockBytes * pages);
      for (size_t page = 0; page < pages; ++page) {
        KVS_TRY(m_pages[page].download(&blocks[page * blockBytes], blockBytes,
                                       m_kvLayout.partOffset(l, p)));
      }
      KVS_TRY(forEachRun(m_kvLayout, l, p, m_rows, [&](size_t at, size_t bytes) {
        return write({&blocks[at], bytes});
      }));
    }
  }
  return okStatus();
}

Status VulkanBackend::importKv(const kv::KvLayout& layout, uint32_t rows,
                               const std::function<Status(std::span<uint8_t>)>& read) {
  if (m_rows != 0)
    return makeError(ErrorCode::kInternal, "a KV cache is restored only into an empty one");
  if (!m_kvLayout.sameStreams(layout)) {
    return makeError(ErrorCode::kInvalidArgument,
                     "the saved KV cache's schemes or seeds differ from this cache's");
  }
  if (rows > m_contextLimit) {
    return makeError(ErrorCode::kInvalidArgument,
                     "the saved KV cache holds {} tokens, the context limit is {}", rows,
                     m_contextLimit);
  }
  KVS_TRY(ensurePages(rows));
  const kv::KvGeometry& g = m_kvLayout.geometry();
  const size_t pages = m_kvLayout.pagesFor(rows);
  std::vector<uint8_t> blocks;
  const auto importAll = [&]() -> Status {
    for (uint32_t l = 0; l < g.nLayer; ++l) {
      for (kv::KvPart p : {kv::KvPart::kKey, kv::KvPart::kValue}) {
        const size_t blockBytes = m_kvLayout.partBytes(l, p);
        blocks.assign(blockBytes * pages, 0);
        KVS_TRY(forEachRun(m_kvLayout, l, p, rows, [&](size_t at, size_t bytes) {
          return read({&blocks[at], bytes});
        }));
        for (size_t page = 0; page < pages; ++page) {
          KVS_TRY(m_pages[page].upload(&blocks[page * blockBytes], blockBytes,
                                       m_kvLayout.partOffset(l, p)));
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
    return status;
  }
  m_rows = rows;
  return okStatus();
}

}  // namespace kvscope::backend
