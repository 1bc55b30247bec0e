#pragma once
// Reads a VkPhysicalDevice's properties and features into a DeviceInfo.
// Shared by listDevices() and Context, so both report the same facts.

#include "gpu/device_info.h"
#include "gpu/vk.h"

namespace kvscope::gpu {

DeviceInfo queryDevice(VkPhysicalDevice device, int index);

}  // namespace kvscope::gpu
