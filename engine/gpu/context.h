#pragma once
// The Vulkan device the engine runs on: instance, chosen physical device,
// logical device with one compute queue, a command pool, memory-type choice
// and a VkPipelineCache persisted in $XDG_CACHE_HOME/kvscope so that the
// second start of any program compiles no pipeline twice.
// One Context per loaded model; not thread-safe (the engine worker owns it).

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>

#include "gpu/device_info.h"
#include "gpu/instance.h"
#include "gpu/vk.h"

namespace kvscope::gpu {

struct ContextOptions {
  int device = -1;          // explicit index; -1: $KVSCOPE_DEVICE, then the best device
  bool validation = false;  // Khronos validation layer + message counting (tests)
  bool persistPipelineCache = true;
  std::filesystem::path pipelineCacheDir;  // empty: $XDG_CACHE_HOME/kvscope
};

class Context {
 public:
  static Expected<std::unique_ptr<Context>> create(const ContextOptions& options = {});
  ~Context();  // saves the pipeline cache if it grew
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  VkDevice device() const { return m_device; }
  VkPhysicalDevice physicalDevice() const { return m_physical; }
  VkQueue queue() const { return m_queue; }
  uint32_t queueFamily() const { return m_queueFamily; }
  VkCommandPool commandPool() const { return m_commandPool; }
  VkPipelineCache pipelineCache() const { return m_pipelineCache; }
  const DeviceInfo& info() const { return m_info; }
  const VkPhysicalDeviceLimits& limits() const { return m_limits; }
  const VkPhysicalDeviceMemoryProperties& memory() const { return m_memory; }

  // Timestamp tick length in ns; 0 when the compute queue cannot time.
  double timestampPeriodNs() const { return m_timestampPeriodNs; }
  uint32_t timestampValidBits() const { return m_timestampValidBits; }

  // Validation messages seen since this context was created (always 0
  // without validation).
  uint64_t validationMessages() const {
    return m_instance->validationMessages() - m_messagesAtStart;
  }
  bool validationEnabled() const { return m_instance->validation(); }
  VkInstance instance() const { return m_instance->handle(); }

  // Where the pipeline cache lives, and how many bytes were loaded at start.
  const std::filesystem::path& pipelineCachePath() const { return m_cachePath; }
  size_t pipelineCacheBytesLoaded() const { return m_cacheBytesLoaded; }
  void markPipelineCacheDirty() { m_cacheDirty = true; }
  Status savePipelineCache();

  // A memory type index allowed by `typeBits` with all `required` flags,
  // preferring one that also has `preferred`; -1 when none exists.
  int findMemoryType(uint32_t typeBits, VkMemoryPropertyFlags required,
                     VkMemoryPropertyFlags preferred = 0) const;

  // Device memory this context's Buffers hold now, in bytes as allocated
  // (what vkAllocateMemory was asked for): the soak test's leak check.
  uint64_t allocatedBytes() const { return m_allocatedBytes.load(); }

  // Runs a one-off command buffer and waits (uploads, tests).
  template <typename F>
  Status runOnce(F&& record);

 private:
  Context() = default;
  Status createDevice(const ContextOptions& options);
  Status loadPipelineCache(const ContextOptions& options);
  Status submitAndWait(VkCommandBuffer cmd);
  Expected<VkCommandBuffer> beginOneShot();

  friend class Buffer;  // counts its allocations in m_allocatedBytes
  std::atomic<uint64_t> m_allocatedBytes{0};
  Instance* m_instance = nullptr;  // the process's (Instance::get)
  uint64_t m_messagesAtStart = 0;
  VkPhysicalDevice m_physical = VK_NULL_HANDLE;
  VkDevice m_device = VK_NULL_HANDLE;
  VkQueue m_queue = VK_NULL_HANDLE;
  uint32_t m_queueFamily = 0;
  VkCommandPool m_commandPool = VK_NULL_HANDLE;
  VkFence m_fence = VK_NULL_HANDLE;
  VkPipelineCache m_pipelineCache = VK_NULL_HANDLE;
  DeviceInfo m_info;
  VkPhysicalDeviceLimits m_limits{};
  VkPhysicalDeviceMemoryProperties m_memory{};
  uint8_t m_pipelineCacheUuid[VK_UUID_SIZE]{};
  double m_timestampPeriodNs = 0.0;
  uint32_t m_timestampValidBits = 0;
  std::filesystem::path m_cachePath;
  size_t m_cacheBytesLoaded = 0;
  bool m_cacheDirty = false;
};

template <typename F>
Status Context::runOnce(F&& record) {
  KVS_ASSIGN_OR_RETURN(VkCommandBuffer cmd, beginOneShot());
  record(cmd);
  return submitAndWait(cmd);
}

}  // namespace kvscope::gpu
