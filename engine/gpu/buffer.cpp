#include "gpu/buffer.h"

#include <atomic>

#include <cstring>
#include <utility>

namespace kvscope::gpu {
namespace {

std::atomic<uint64_t> g_liveBytes{0};
std::atomic<uint64_t> g_peakBytes{0};

}  // namespace

uint64_t Buffer::liveBytes() {
  return g_liveBytes.load();
}

uint64_t Buffer::peakLiveBytes() {
  return g_peakBytes.load();
}

void Buffer::resetPeakLiveBytes() {
  g_peakBytes = g_liveBytes.load();
}

Expected<Buffer> Buffer::create(Context& ctx, size_t bytes, MemoryUse use) {
  if (bytes == 0) bytes = 4;  // Vulkan forbids empty buffers; keep callers simple
  Buffer b;
  b.m_ctx = &ctx;
  b.m_size = bytes;
  VkBufferCreateInfo ci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  ci.size = bytes;
  ci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
             VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  ci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  KVS_VK(vkCreateBuffer(ctx.device(), &ci, nullptr, &b.m_buffer), "vkCreateBuffer");

  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(ctx.device(), b.m_buffer, &req);
  int type = -1;
  if (use == MemoryUse::kDevice) {
    // Device-local; host-visible+coherent too when the device offers it (unified memory).
    type = ctx.findMemoryType(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                              ctx.info().unifiedMemory ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                                             VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                                                       : 0);
  }
  if (type < 0) {
    type = ctx.findMemoryType(
        req.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
        VK_MEMORY_PROPERTY_HOST_COHERENT_BIT | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  }
  if (type < 0)
    return makeError(ErrorCode::kDevice, "no usable memory type for a {}-byte buffer", bytes);

  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = static_cast<uint32_t>(type);
  VkResult r = vkAllocateMemory(ctx.device(), &ai, nullptr, &b.m_memory);
  if (r != VK_SUCCESS) {
    return makeError(r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY
                         ? ErrorCode::kOutOfMemory
                         : ErrorCode::kDevice,
                     "cannot allocate {:.1f} MiB of {} memory ({})",
                     static_cast<double>(bytes) / (1 << 20),
                     use == MemoryUse::kDevice ? "device" : "host", vkResultName(r));
  }
  b.m_allocated = req.size;
  ctx.m_allocatedBytes += b.m_allocated;
  const uint64_t live = g_liveBytes += b.m_allocated;
  for (uint64_t peak = g_peakBytes.load(); live > peak && !g_peakBytes.compare_exchange_weak(peak, live);) {
  }
  KVS_VK(vkBindBufferMemory(ctx.device(), b.m_buffer, b.m_memory, 0), "vkBindBufferMemory");
  const auto flags = ctx.memory().memoryTypes[type].propertyFlags;
  if (flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) {
    KVS_VK(vkMapMemory(ctx.device(), b.m_memory, 0, VK_WHOLE_SIZE, 0, &b.m_mapped), "vkMapMemory");
    b.m_coherent = flags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  }
  return b;
}

Buffer::~Buffer() {
  release();
}

Buffer::Buffer(Buffer&& other) noexcept {
  *this = std::move(other);
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    m_ctx = std::exchange(other.m_ctx, nullptr);
    m_buffer = std::exchange(other.m_buffer, VK_NULL_HANDLE);
    m_memory = std::exchange(other.m_memory, VK_NULL_HANDLE);
    m_size = std::exchange(other.m_size, 0);
    m_allocated = std::exchange(other.m_allocated, 0);
    m_mapped = std::exchange(other.m_mapped, nullptr);
    m_coherent = other.m_coherent;
  }
  return *this;
}

void Buffer::release() {
  if (!m_ctx) return;
  if (m_buffer) vkDestroyBuffer(m_ctx->device(), m_buffer, nullptr);
  if (m_memory) vkFreeMemory(m_ctx->device(), m_memory, nullptr);  // also unmaps
  m_ctx->m_allocatedBytes -= m_allocated;
  g_liveBytes -= std::exchange(m_allocated, 0);
  m_ctx = nullptr;
  m_buffer = VK_NULL_HANDLE;
  m_memory = VK_NULL_HANDLE;
  m_mapped = nullptr;
}

Status Buffer::upload(const void* data, size_t bytes, size_t offset) {
  if (offset + bytes > m_size) {
    return makeError(ErrorCode::kInternal, "upload of {} bytes at {} overflows a {}-byte buffer",
                     bytes, offset, m_size);
  }
  if (m_mapped) {
    std::memcpy(static_cast<char*>(m_mapped) + offset, data, bytes);
    if (!m_coherent) {
      VkMappedMemoryRange range{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, nullptr, m_memory, 0,
                                VK_WHOLE_SIZE};
      KVS_VK(vkFlushMappedMemoryRanges(m_ctx->device(), 1, &range), "vkFlushMappedMemoryRanges");
    }
    return okStatus();
  }
  KVS_ASSIGN_OR_RETURN(Buffer staging, Buffer::create(*m_ctx, bytes, MemoryUse::kHost));
  KVS_TRY(staging.upload(data, bytes));
  return m_ctx->runOnce([&](VkCommandBuffer cmd) {
    VkBufferCopy region{0, offset, bytes};
    vkCmdCopyBuffer(cmd, staging.handle(), m_buffer, 1, &region);
  });
}

Status Buffer::download(void* data, size_t bytes, size_t offset) const {
  if (offset + bytes > m_size) {
    return makeError(ErrorCode::kInternal, "download of {} bytes at {} overflows a {}-byte buffer",
                     bytes, offset, m_size);
  }
  if (m_mapped) {
    if (!m_coherent) {
      VkMappedMemoryRange range{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, nullptr, m_memory, 0,
                                VK_WHOLE_SIZE};
      KVS_VK(vkInvalidateMappedMemoryRanges(m_ctx->device(), 1, &range),
             "vkInvalidateMappedMemoryRanges");
    }
    std::memcpy(data, static_cast<const char*>(m_mapped) + offset, bytes);
    return okStatus();
  }
  KVS_ASSIGN_OR_RETURN(Buffer staging, Buffer::create(*m_ctx, bytes, MemoryUse::kHost));
  KVS_TRY(m_ctx->runOnce([&](VkCommandBuffer cmd) {
    VkBufferCopy region{offset, 0, bytes};
    vkCmdCopyBuffer(cmd, m_buffer, staging.handle(), 1, &region);
  }));
  return staging.download(data, bytes);
}

}  // namespace kvscope::gpu
