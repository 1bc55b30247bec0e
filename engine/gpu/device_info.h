#pragma once
// What the user needs to know about each Vulkan device, and the choice rule:
// discrete > integrated > virtual > CPU, ties broken by device-local memory.
// An explicit index (--device N or $KVSCOPE_DEVICE) overrides the rule.

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace kvscope::gpu {

enum class DeviceType { kDiscrete, kIntegrated, kVirtual, kCpu, kOther };
const char* deviceTypeName(DeviceType type);

struct MemoryHeap {
  uint64_t bytes = 0;
  bool deviceLocal = false;
};

struct DeviceInfo {
  int index = 0;  // position in the loader's enumeration; stable for --device
  std::string name;
  DeviceType type = DeviceType::kOther;
  std::string apiVersion;  // "1.3.230"
  std::string driverInfo;  // "Mesa 22.3.6 (LLVM 15.0.6)"
  uint32_t vendorId = 0;
  uint32_t deviceId = 0;
  std::vector<MemoryHeap> heaps;
  uint64_t deviceLocalBytes = 0;  // largest device-local heap
  // What this process may hold on that heap in all, by the driver's
  // VK_EXT_memory_budget estimate (other programs' use taken out, this
  // process's own counted in); 0 when the driver does not report a budget.
  uint64_t memoryBudgetBytes = 0;
  uint32_t subgroupSize = 0;
  bool subgroupArithmetic = false;  // subgroupAdd & co. in compute shaders
  bool shaderInt64 = false;
  bool shaderFloat16 = false;
  bool shaderInt8 = false;
  bool storageBuffer16 = false;
  bool storageBuffer8 = false;
  bool unifiedMemory = false;  // some memory type is both device-local and host-visible
  bool timestampsSupported = false;
  // Loop iterations one shader invocation may run, over all its loops
  // together; 0 when the driver has no such limit. llvmpipe (lavapipe) stops
  // every loop of an invocation once 65535 iterations have run in all
  // (gallivm's loop limiter, a guard against hangs) and says nothing: the
  // rest of the invocation's work is skipped. Kernels whose workgroups loop
  // over tasks keep each one under it (gpu/loop_limit.h).
  uint32_t loopIterationLimit = 0;
};

// Enumerates devices. Fails with kDevice when the loader or any driver is missing,
// naming the Debian package to install.
Expected<std::vector<DeviceInfo>> listDevices();

// Applies the choice rule. `requested` >= 0 wins, else $KVSCOPE_DEVICE, else the
// best-ranked device. An out-of-range index is an error that lists the choices.
Expected<int> chooseDevice(const std::vector<DeviceInfo>& devices, int requested = -1);

}  // namespace kvscope::gpu
