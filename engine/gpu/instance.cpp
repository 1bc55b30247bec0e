#include "gpu/instance.h"

#include <cstring>
#include <mutex>

#include "core/log.h"

namespace kvscope::gpu {
namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

bool hasLayer(const char* name) {
  uint32_t count = 0;
  if (vkEnumerateInstanceLayerProperties(&count, nullptr) != VK_SUCCESS) return false;
  std::vector<VkLayerProperties> layers(count);
  if (vkEnumerateInstanceLayerProperties(&count, layers.data()) != VK_SUCCESS) return false;
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

// `layer` null: the loader's and drivers' extensions; else those a layer adds.
bool hasInstanceExtension(const char* name, const char* layer = nullptr) {
  uint32_t count = 0;
  if (vkEnumerateInstanceExtensionProperties(layer, &count, nullptr) != VK_SUCCESS) return false;
  std::vector<VkExtensionProperties> exts(count);
  if (vkEnumerateInstanceExtensionProperties(layer, &count, exts.data()) != VK_SUCCESS)
    return false;
  for (const auto& e : exts)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

}  // namespace

Expected<Instance*> Instance::get(bool validation) {
  static std::mutex mutex;
  static Instance* instances[2] = {nullptr, nullptr};  // [validation]; never freed, see header
  std::lock_guard<std::mutex> lock(mutex);
  Instance*& slot = instances[validation ? 1 : 0];
  if (!slot) {
    KVS_ASSIGN_OR_RETURN(auto made, create(validation));
    slot = made.release();
  }
  return slot;
}

Expected<std::unique_ptr<Instance>> Instance::create(bool validation) {
  KVS_TRY(loadVulkan());
  std::unique_ptr<Instance> inst(new Instance());

  uint32_t loaderVersion = VK_API_VERSION_1_0;
  if (vkEnumerateInstanceVersion) vkEnumerateInstanceVersion(&loaderVersion);
  if (loaderVersion < VK_API_VERSION_1_1) {
    return makeError(ErrorCode::kDevice,
                     "the Vulkan loader supports only Vulkan 1.0; kvscope needs 1.1");
  }
  inst->m_apiVersion =
      loaderVersion >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_1;

  std::vector<const char*> layers;
  std::vector<const char*> extensions;
  bool debugUtils = false, syncValidation = false;
  if (validation) {
    if (!hasLayer(kValidationLayer)) {
      return makeError(ErrorCode::kDevice,
                       "Vulkan validation was requested but {} is not installed "
                       "(`apt-get install vulkan-validationlayers`)",
                       kValidationLayer);
    }
    layers.push_back(kValidationLayer);
    debugUtils = hasInstanceExtension(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    if (debugUtils) extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    syncValidation =
        hasInstanceExtension(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME, kValidationLayer);
    if (syncValidation) {
      extensions.push_back(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
    } else {
      log::write(log::Level::kWarn,
                 "the Vulkan validation layer offers no VK_EXT_validation_features: "
                 "synchronization (missing barriers) is not validated");
    }
  }

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "kvscope";
  app.applicationVersion = VK_MAKE_VERSION(0, 1, 0);
  app.pEngineName = "kvscope";
  app.apiVersion = inst->m_apiVersion;

  VkDebugUtilsMessengerCreateInfoEXT dbg{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  dbg.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                        VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  dbg.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  dbg.pfnUserCallback = &Instance::onMessage;
  dbg.pUserData = inst.get();

  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  ci.enabledLayerCount = static_cast<uint32_t>(layers.size());
  ci.ppEnabledLayerNames = layers.data();
  ci.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  ci.ppEnabledExtensionNames = extensions.data();
  if (debugUtils) ci.pNext = &dbg;  // also catches messages from create/destroy

  // Synchronization validation checks every recorded dependency: a barrier the
  // executor's hazard tracking left out is reported as a read-after-write (or
  // write-after-read/write) hazard, on any device, lavapipe included, where a
  // serial executor would otherwise hide it.
  const VkValidationFeatureEnableEXT syncFeature =
      VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = &syncFeature;
  if (syncValidation) {
    features.pNext = ci.pNext;
    ci.pNext = &features;
  }

  VkResult r = vkCreateInstance(&ci, nullptr, &inst->m_instance);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER) {
    return makeError(ErrorCode::kDevice,
                     "no Vulkan driver is installed; install `mesa-vulkan-drivers` (CPU device "
                     "lavapipe) or your GPU vendor's Vulkan driver");
  }
  KVS_VK(r, "vkCreateInstance");
  volkLoadInstanceOnly(inst->m_instance);

  if (debugUtils) {
    r = vkCreateDebugUtilsMessengerEXT(inst->m_instance, &dbg, nullptr, &inst->m_messenger);
    if (r != VK_SUCCESS) inst->destroy();
    KVS_VK(r, "vkCreateDebugUtilsMessengerEXT");
  }
  return inst;
}

void Instance::destroy() {
  if (m_messenger) vkDestroyDebugUtilsMessengerEXT(m_instance, m_messenger, nullptr);
  if (m_instance) vkDestroyInstance(m_instance, nullptr);
  m_messenger = VK_NULL_HANDLE;
  m_instance = VK_NULL_HANDLE;
}

Expected<std::vector<VkPhysicalDevice>> Instance::physicalDevices() const {
  uint32_t count = 0;
  KVS_VK(vkEnumeratePhysicalDevices(m_instance, &count, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> devices(count);
  KVS_VK(vkEnumeratePhysicalDevices(m_instance, &count, devices.data()),
         "vkEnumeratePhysicalDevices");
  devices.resize(count);
  if (devices.empty()) {
    return makeError(ErrorCode::kDevice,
                     "no Vulkan device found; install `mesa-vulkan-drivers` (CPU device lavapipe) "
                     "or your GPU vendor's Vulkan driver");
  }
  return devices;
}

VKAPI_ATTR VkBool32 VKAPI_CALL Instance::onMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                   VkDebugUtilsMessageTypeFlagsEXT,
                                                   const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                   void* user) {
  auto* self = static_cast<Instance*>(user);
  self->m_messages.fetch_add(1);
  const bool isError = severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  log::write(isError ? log::Level::kError : log::Level::kWarn,
             fmt::format("vulkan validation: {}", data && data->pMessage ? data->pMessage : "?"));
  return VK_FALSE;
}

}  // namespace kvscope::gpu
