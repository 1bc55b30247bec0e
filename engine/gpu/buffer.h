#pragma once
// Move-only storage buffer with its own memory.
//
// kDevice buffers live in device-local memory; when that memory is also host
// visible (unified memory: integrated GPUs, lavapipe) they are mapped and
// written directly, otherwise upload()/download() go through a staging
// buffer. kHost buffers are host-visible and mapped (readback, staging).

#include <cstddef>
#include <cstdint>
#include <span>

#include "gpu/context.h"

namespace kvscope::gpu {

enum class MemoryUse { kDevice, kHost };

class Buffer {
 public:
  Buffer() = default;
  static Expected<Buffer> create(Context& ctx, size_t bytes, MemoryUse use = MemoryUse::kDevice);
  // Memory all Buffers of the process hold now, over every Context (what
  // vkAllocateMemory was asked for): a context that is gone but leaked
  // buffers still counts here. The soak test's leak check.
  static uint64_t liveBytes();
  // The most liveBytes() has been since the last resetPeakLiveBytes() (tests:
  // what a KV policy switch holds at once).
  static uint64_t peakLiveBytes();
  static void resetPeakLiveBytes();
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer handle() const { return m_buffer; }
  size_t size() const { return m_size; }
  bool hostVisible() const { return m_mapped != nullptr; }
  void* mapped() const { return m_mapped; }

  // Copy host bytes into the buffer at `offset` (staged when not host-visible).
  Status upload(const void* data, size_t bytes, size_t offset = 0);
  // Copy buffer bytes at `offset` to host memory (staged when not host-visible).
  Status download(void* data, size_t bytes, size_t offset = 0) const;

  template <typename T>
  Status upload(std::span<const T> values, size_t offset = 0) {
    return upload(values.data(), values.size_bytes(), offset);
  }
  template <typename T>
  Status download(std::span<T> values, size_t offset = 0) const {
    return download(values.data(), values.size_bytes(), offset);
  }

 private:
  void release();

  Context* m_ctx = nullptr;
  VkBuffer m_buffer = VK_NULL_HANDLE;
  VkDeviceMemory m_memory = VK_NULL_HANDLE;
  size_t m_size = 0;
  uint64_t m_allocated = 0;  // bytes of m_memory, counted in the context
  void* m_mapped = nullptr;
  bool m_coherent = true;
};

}  // namespace kvscope::gpu
