#include "gpu/device_query.h"

#include <algorithm>
#include <string_view>
#include <vector>

namespace kvscope::gpu {
namespace {

DeviceType toDeviceType(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return DeviceType::kDiscrete;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return DeviceType::kIntegrated;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return DeviceType::kVirtual;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return DeviceType::kCpu;
    default: return DeviceType::kOther;
  }
}

std::string versionString(uint32_t v) {
  return fmt::format("{}.{}.{}", VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v), VK_API_VERSION_PATCH(v));
}

}  // namespace

DeviceInfo queryDevice(VkPhysicalDevice device, int index) {
  VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props.pNext = &subgroup;
  VkPhysicalDeviceProperties base;
  vkGetPhysicalDeviceProperties(device, &base);
  const bool v12 = base.apiVersion >= VK_API_VERSION_1_2;
  if (v12) subgroup.pNext = &driver;  // driver properties are core only from 1.2
  vkGetPhysicalDeviceProperties2(device, &props);

  VkPhysicalDeviceShaderFloat16Int8Features f16i8{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  VkPhysicalDevice16BitStorageFeatures s16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDevice8BitStorageFeatures s8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES};
  VkPhysicalDeviceFeatures2 feats{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  feats.pNext = &s16;
  if (v12) {
    s16.pNext = &f16i8;
    f16i8.pNext = &s8;
  }
  vkGetPhysicalDeviceFeatures2(device, &feats);

  uint32_t extensionCount = 0;
  vkEnumerateDeviceExtensionProperties(device, nullptr, &extensionCount, nullptr);
  std::vector<VkExtensionProperties> extensions(extensionCount);
  vkEnumerateDeviceExtensionProperties(device, nullptr, &extensionCount, extensions.data());
  const bool hasBudget =
      std::any_of(extensions.begin(), extensions.end(), [](const VkExtensionProperties& e) {
        return std::string_view(e.extensionName) == VK_EXT_MEMORY_BUDGET_EXTENSION_NAME;
      });
  VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
  VkPhysicalDeviceMemoryProperties2 mem2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
  if (hasBudget) mem2.pNext = &budget;
  vkGetPhysicalDeviceMemoryProperties2(device, &mem2);
  const VkPhysicalDeviceMemoryProperties& mem = mem2.memoryProperties;

  DeviceInfo info;
  info.index = index;
  info.name = props.properties.deviceName;
  info.type = toDeviceType(props.properties.deviceType);
  info.apiVersion = versionString(props.properties.apiVersion);
  info.driverInfo = v12 && driver.driverInfo[0] ? std::string(driver.driverInfo)
                                                 : versionString(props.properties.driverVersion);
  if (v12 && driver.driverID == VK_DRIVER_ID_MESA_LLVMPIPE) info.loopIterationLimit = 65535;
  info.vendorId = props.properties.vendorID;
  info.deviceId = props.properties.deviceID;
  for (uint32_t h = 0; h < mem.memoryHeapCount; ++h) {
    const bool local = mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
    info.heaps.push_back({mem.memoryHeaps[h].size, local});
    if (local && mem.memoryHeaps[h].size > info.deviceLocalBytes) {
      info.deviceLocalBytes = mem.memoryHeaps[h].size;
      // The process's whole allowance, what it already holds included, so a
      // check made with a model loaded weighs the same as one made before.
      info.memoryBudgetBytes = hasBudget ? budget.heapBudget[h] : 0;
    }
  }
  for (uint32_t t = 0; t < mem.memoryTypeCount; ++t) {
    const auto f = mem.memoryTypes[t].propertyFlags;
    if ((f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) && (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) &&
        (f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)) {
      // Only a host-visible type on the *largest* device-local heap counts as
      // unified; a small BAR window on a discrete GPU does not.
      if (mem.memoryHeaps[mem.memoryTypes[t].heapIndex].size == info.deviceLocalBytes)
        info.unifiedMemory = true;
    }
  }
  info.subgroupSize = subgroup.subgroupSize;
  info.subgroupArithmetic = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                            (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  info.shaderInt64 = feats.features.shaderInt64;
  info.shaderFloat16 = v12 && f16i8.shaderFloat16;
  info.shaderInt8 = v12 && f16i8.shaderInt8;
  info.storageBuffer16 = s16.storageBuffer16BitAccess;
  info.storageBuffer8 = v12 && s8.storageBuffer8BitAccess;
  info.timestampsSupported = props.properties.limits.timestampComputeAndGraphics &&
                             props.properties.limits.timestampPeriod > 0;
  return info;
}

}  // namespace kvscope::gpu
