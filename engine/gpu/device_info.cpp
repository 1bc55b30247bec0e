#include "gpu/device_info.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "gpu/device_query.h"
#include "gpu/instance.h"

namespace kvscope::gpu {

const char* deviceTypeName(DeviceType type) {
  switch (type) {
    case DeviceType::kDiscrete:
      return "discrete GPU";
    case DeviceType::kIntegrated:
      return "integrated GPU";
    case DeviceType::kVirtual:
      return "virtual GPU";
    case DeviceType::kCpu:
      return "CPU";
    case DeviceType::kOther:
      return "other";
  }
  return "other";
}

Expected<std::vector<DeviceInfo>> listDevices() {
  KVS_ASSIGN_OR_RETURN(Instance * instance, Instance::get(/*validation=*/false));
  KVS_ASSIGN_OR_RETURN(auto physical, instance->physicalDevices());
  std::vector<DeviceInfo> out;
  for (size_t i = 0; i < physical.size(); ++i)
    out.push_back(queryDevice(physical[i], static_cast<int>(i)));
  return out;
}

namespace {

int typeRank(DeviceType t) {
  switch (t) {
    case DeviceType::kDiscrete:
      return 0;
    case DeviceType::kIntegrated:
      return 1;
    case DeviceType::kVirtual:
      return 2;
    case DeviceType::kCpu:
      return 3;
    case DeviceType::kOther:
      return 4;
  }
  return 4;
}

Expected<int> parseIndex(const char* text, const char* source) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 0 || v > 1000) {
    return makeError(ErrorCode::kInvalidArgument, "{} must be a device index (0, 1, …), not '{}'",
                     source, text);
  }
  return static_cast<int>(v);
}

}  // namespace

Expected<int> chooseDevice(const std::vector<DeviceInfo>& devices, int requested) {
  if (devices.empty()) return makeError(ErrorCode::kDevice, "no Vulkan device found");
  int index = requested;
  const char* source = "--device";
  if (index < 0) {
    if (const char* env = std::getenv("KVSCOPE_DEVICE"); env && env[0]) {
      source = "KVSCOPE_DEVICE";
      KVS_ASSIGN_OR_RETURN(index, parseIndex(env, source));
    }
  }
  if (index >= 0) {
    if (index >= static_cast<int>(devices.size())) {
      std::string choices;
      for (const auto& d : devices) choices += fmt::format("\n  [{}] {}", d.index, d.name);
      return makeError(ErrorCode::kInvalidArgument, "{} {} is out of range; devices:{}", source,
                       index, choices);
    }
    return index;
  }
  auto best = std::min_element(devices.begin(), devices.end(), [](const auto& a, const auto& b) {
    if (typeRank(a.type) != typeRank(b.type)) return typeRank(a.type) < typeRank(b.type);
    return a.deviceLocalBytes > b.deviceLocalBytes;
  });
  return best->index;
}

}  // namespace kvscope::gpu
