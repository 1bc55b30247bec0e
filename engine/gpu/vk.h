#pragma once
// The one include for Vulkan inside engine/gpu: volk's function pointers
// (the loader is opened at run time) plus result-to-Error helpers.

#include <volk.h>

#include "core/error.h"

namespace kvscope::gpu {

// Opens libvulkan.so.1 once. Fails with a message naming the Debian packages.
Status loadVulkan();

const char* vkResultName(VkResult r);

// Turns a failed VkResult into an Error; out-of-memory results map to kOutOfMemory.
Error vkError(VkResult r, const char* what);

}  // namespace kvscope::gpu

// Evaluate a Vulkan call; on failure return an Error describing `what` failed.
#define KVS_VK(call, what)                                                        \
  do {                                                                            \
    VkResult kvs_vk_r_ = (call);                                                  \
    if (kvs_vk_r_ != VK_SUCCESS) return ::kvscope::gpu::vkError(kvs_vk_r_, what); \
  } while (0)
