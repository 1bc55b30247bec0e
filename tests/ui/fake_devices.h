#pragma once
// Device lists for UI tests, so they do not depend on the Vulkan drivers of the machine.

#include <vector>

#include "gpu/device_info.h"

namespace kvscope::ui::test {

inline std::vector<gpu::DeviceInfo> fakeDevices() {
  gpu::DeviceInfo cpu;
  cpu.index = 0;
  cpu.name = "llvmpipe (LLVM 15.0.6, 256 bits)";
  cpu.type = gpu::DeviceType::kCpu;
  cpu.apiVersion = "1.3.230";
  cpu.driverInfo = "Mesa 22.3.6 (LLVM 15.0.6)";

  gpu::DeviceInfo discrete;
  discrete.index = 1;
  discrete.name = "Test Discrete GPU";
  discrete.type = gpu::DeviceType::kDiscrete;
  discrete.apiVersion = "1.3.280";
  discrete.driverInfo = "Test driver 1.0";
  discrete.deviceLocalBytes = 8ull << 30;
  return {cpu, discrete};
}

}  // namespace kvscope::ui::test
