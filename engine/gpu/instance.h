#pragma once
// RAII VkInstance, optionally with the Khronos validation layer and a debug
// messenger that counts (and logs) every validation message. Tests create
// instances with validation on and fail on any message.

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "gpu/vk.h"

namespace kvscope::gpu {

class Instance {
 public:
  // `validation` requires VK_LAYER_KHRONOS_validation (Debian: vulkan-validationlayers).
  static Expected<std::unique_ptr<Instance>> create(bool validation);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  VkInstance handle() const { return m_instance; }
  uint32_t apiVersion() const { return m_apiVersion; }
  bool validation() const { return m_messenger != VK_NULL_HANDLE; }
  // Number of validation warnings/errors reported since creation.
  uint64_t validationMessages() const { return m_messages.load(); }

  Expected<std::vector<VkPhysicalDevice>> physicalDevices() const;

 private:
  Instance() = default;
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
