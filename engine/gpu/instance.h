#pragma once
// The process's VkInstance, optionally with the Khronos validation layer and
// a debug messenger that counts (and logs) every validation message. Tests
// create contexts with validation on and fail on any message.
//
// One instance per process (two at most: with and without validation), made
// on first use and never destroyed. Destroying the last instance makes the
// loader unload the driver; NVIDIA's driver (580, H200) then failed to load
// again after ~30 create/destroy cycles in one process ("Could not get
// 'vkCreateInstance' via 'vk_icdGetInstanceProcAddr'"), so a long app session
// that opens many models, or a test run, would lose the GPU.

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "gpu/vk.h"

namespace kvscope::gpu {

class Instance {
 public:
  // `validation` requires VK_LAYER_KHRONOS_validation (Debian: vulkan-validationlayers).
  // Thread-safe; a failed creation is retried by the next call.
  static Expected<Instance*> get(bool validation);
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  VkInstance handle() const { return m_instance; }
  uint32_t apiVersion() const { return m_apiVersion; }
  bool validation() const { return m_messenger != VK_NULL_HANDLE; }
  // Number of validation warnings/errors reported since creation (by every
  // context of the process; a context counts from its own start).
  uint64_t validationMessages() const { return m_messages.load(); }

  Expected<std::vector<VkPhysicalDevice>> physicalDevices() const;

 private:
  Instance() = default;
  static Expected<std::unique_ptr<Instance>> create(bool validation);
  void destroy();  // undoes a partial create()
  static VKAPI_ATTR VkBool32 VKAPI_CALL onMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                  VkDebugUtilsMessageTypeFlagsEXT types,
                                                  const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                  void* user);

  VkInstance m_instance = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT m_messenger = VK_NULL_HANDLE;
  uint32_t m_apiVersion = VK_API_VERSION_1_1;
  std::atomic<uint64_t> m_messages{0};
};

}  // namespace kvscope::gpu
