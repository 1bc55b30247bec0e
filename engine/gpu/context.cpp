#include "gpu/context.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "core/log.h"
#include "core/paths.h"
#include "gpu/device_query.h"

namespace kvscope::gpu {

Expected<std::unique_ptr<Context>> Context::create(const ContextOptions& options) {
  std::unique_ptr<Context> ctx(new Context());
  KVS_ASSIGN_OR_RETURN(ctx->m_instance, Instance::get(options.validation));
  ctx->m_messagesAtStart = ctx->m_instance->validationMessages();
  KVS_TRY(ctx->createDevice(options));
  KVS_TRY(ctx->loadPipelineCache(options));
  return ctx;
}

Status Context::createDevice(const ContextOptions& options) {
  KVS_ASSIGN_OR_RETURN(auto physical, m_instance->physicalDevices());
  std::vector<DeviceInfo> infos;
  for (size_t i = 0; i < physical.size(); ++i) infos.push_back(queryDevice(physical[i], static_cast<int>(i)));
  KVS_ASSIGN_OR_RETURN(int chosen, chooseDevice(infos, options.device));
  m_physical = physical[static_cast<size_t>(chosen)];
  m_info = infos[static_cast<size_t>(chosen)];

  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(m_physical, &props);
  m_limits = props.limits;
  std::memcpy(m_pipelineCacheUuid, props.pipelineCacheUUID, VK_UUID_SIZE);
  vkGetPhysicalDeviceMemoryProperties(m_physical, &m_memory);

  uint32_t familyCount = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(m_physical, &familyCount, nullptr);
  std::vector<VkQueueFamilyProperties> families(familyCount);
  vkGetPhysicalDeviceQueueFamilyProperties(m_physical, &familyCount, families.data());
  // Prefer a compute-only family (async compute on discrete GPUs), else any with compute.
  int family = -1;
  for (uint32_t i = 0; i < familyCount; ++i) {
    if (!(families[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (family < 0 || !(families[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) family = static_cast<int>(i);
  }
  if (family < 0) return makeError(ErrorCode::kDevice, "{} has no compute queue", m_info.name);
  m_queueFamily = static_cast<uint32_t>(family);
  m_timestampValidBits = families[m_queueFamily].timestampValidBits;
  m_timestampPeriodNs = m_timestampValidBits ? props.limits.timestampPeriod : 0.0;

  // Enable the optional storage/arithmetic features kernels may select variants for.
  VkPhysicalDevice16BitStorageFeatures s16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  s16.storageBuffer16BitAccess = m_info.storageBuffer16;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &s16;
  // Attention indexes the KV cache's page array with a dynamically uniform index.
  VkPhysicalDeviceFeatures supported;
  vkGetPhysicalDeviceFeatures(m_physical, &supported);
  features.features.shaderStorageBufferArrayDynamicIndexing = supported.shaderStorageBufferArrayDynamicIndexing;
  features.features.shaderInt64 = m_info.shaderInt64;
  VkPhysicalDeviceShaderFloat16Int8Features f16i8{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  VkPhysicalDevice8BitStorageFeatures s8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES};
  if (props.apiVersion >= VK_API_VERSION_1_2) {
    f16i8.shaderFloat16 = m_info.shaderFloat16;
    f16i8.shaderInt8 = m_info.shaderInt8;
    s8.storageBuffer8BitAccess = m_info.storageBuffer8;
    s16.pNext = &f16i8;
    f16i8.pNext = &s8;
  }

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = m_queueFamily;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.pNext = &features;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  KVS_VK(vkCreateDevice(m_physical, &dci, nullptr, &m_device), "vkCreateDevice");
  volkLoadDevice(m_device);
  vkGetDeviceQueue(m_device, m_queueFamily, 0, &m_queue);

  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = m_queueFamily;
  KVS_VK(vkCreateCommandPool(m_device, &pci, nullptr, &m_commandPool), "vkCreateCommandPool");
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  KVS_VK(vkCreateFence(m_device, &fci, nullptr, &m_fence), "vkCreateFence");
  log::info("vulkan device: {} ({})", m_info.name, deviceTypeName(m_info.type));
  return okStatus();
}

Status Context::loadPipelineCache(const ContextOptions& options) {
  std::vector<char> blob;
  if (options.persistPipelineCache) {
    std::filesystem::path dir = options.pipelineCacheDir;
    if (dir.empty()) {
      auto cache = paths::cacheDir();
      if (cache.ok()) dir = *cache;
      else log::warn("pipeline cache disabled: {}", cache.error().message);
    }
    if (!dir.empty()) {
      std::string uuid;
      for (uint8_t b : m_pipelineCacheUuid) uuid += fmt::format("{:02x}", b);
      m_cachePath = dir / fmt::format("pipelines-{:04x}-{:04x}-{}.bin", m_info.vendorId, m_info.deviceId, uuid);
      std::ifstream in(m_cachePath, std::ios::binary);
      if (in) blob.assign(std::istreambuf_iterator<char>(in), {});
    }
  }
  // Only hand the driver data whose header matches this device; anything else
  // (another driver version, a truncated file) is dropped and rebuilt.
  if (!blob.empty()) {
    VkPipelineCacheHeaderVersionOne header{};
    bool valid = blob.size() >= sizeof(header);
    if (valid) {
      std::memcpy(&header, blob.data(), sizeof(header));
      valid = header.headerVersion == VK_PIPELINE_CACHE_HEADER_VERSION_ONE &&
              header.vendorID == m_info.vendorId && header.deviceID == m_info.deviceId &&
              std::memcmp(header.pipelineCacheUUID, m_pipelineCacheUuid, VK_UUID_SIZE) == 0;
    }
    if (!valid) {
      log::info("ignoring stale pipeline cache {}", m_cachePath.string());
      blob.clear();
    }
  }
  VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  ci.initialDataSize = blob.size();
  ci.pInitialData = blob.empty() ? nullptr : blob.data();
  KVS_VK(vkCreatePipelineCache(m_device, &ci, nullptr, &m_pipelineCache), "vkCreatePipelineCache");
  m_cacheBytesLoaded = blob.size();
  return okStatus();
}

Status Context::savePipelineCache() {
  if (m_cachePath.empty() || !m_cacheDirty) return okStatus();
  size_t size = 0;
  KVS_VK(vkGetPipelineCacheData(m_device, m_pipelineCache, &size, nullptr), "vkGetPipelineCacheData");
  std::vector<char> data(size);
  KVS_VK(vkGetPipelineCacheData(m_device, m_pipelineCache, &size, data.data()), "vkGetPipelineCacheData");
  KVS_TRY(paths::writeFileAtomic(m_cachePath, data.data(), size));
  m_cacheDirty = false;
  return okStatus();
}

Context::~Context() {
  if (m_device) {
    vkDeviceWaitIdle(m_device);
    if (auto s = savePipelineCache(); !s.ok()) log::warn("could not save pipeline cache: {}", s.error().message);
    if (m_pipelineCache) vkDestroyPipelineCache(m_device, m_pipelineCache, nullptr);
    if (m_fence) vkDestroyFence(m_device, m_fence, nullptr);
    if (m_commandPool) vkDestroyCommandPool(m_device, m_commandPool, nullptr);
    vkDestroyDevice(m_device, nullptr);
  }
}

int Context::findMemoryType(uint32_t typeBits, VkMemoryPropertyFlags required,
                            VkMemoryPropertyFlags preferred) const {
  int fallback = -1;
  for (uint32_t i = 0; i < m_memory.memoryTypeCount; ++i) {
    if (!(typeBits & (1u << i))) continue;
    const auto flags = m_memory.memoryTypes[i].propertyFlags;
    if ((flags & required) != required) continue;
    if ((flags & preferred) == preferred) return static_cast<int>(i);
    if (fallback < 0) fallback = static_cast<int>(i);
  }
  return fallback;
}

Expected<VkCommandBuffer> Context::beginOneShot() {
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = m_commandPool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  KVS_VK(vkAllocateCommandBuffers(m_device, &ai, &cmd), "vkAllocateCommandBuffers");
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VkResult r = vkBeginCommandBuffer(cmd, &bi);
  if (r != VK_SUCCESS) {
    vkFreeCommandBuffers(m_device, m_commandPool, 1, &cmd);
    return vkError(r, "vkBeginCommandBuffer");
  }
  return cmd;
}

Status Context::submitAndWait(VkCommandBuffer cmd) {
  VkResult r = vkEndCommandBuffer(cmd);
  if (r == VK_SUCCESS) {
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd;
    r = vkQueueSubmit(m_queue, 1, &si, m_fence);
    if (r == VK_SUCCESS) r = vkWaitForFences(m_device, 1, &m_fence, VK_TRUE, UINT64_MAX);
    vkResetFences(m_device, 1, &m_fence);
  }
  vkFreeCommandBuffers(m_device, m_commandPool, 1, &cmd);
  if (r != VK_SUCCESS) return vkError(r, "one-shot submit");
  return okStatus();
}

}  // namespace kvscope::gpu
