#pragma once
// A quick end-to-end check of a Vulkan device: open it, build every pipeline,
// run a small rmsnorm -> matvec -> softmax step and compare it with the CPU
// reference. Reports the start-up timings that pipeline caching improves: on
// lavapipe shader compilation happens at the first dispatch and is cached by
// Mesa's own disk cache; on GPU drivers it happens at pipeline creation and is
// cached by our persisted VkPipelineCache.

#include <string>

#include "core/error.h"

namespace kvscope::backend {

struct DeviceCheckReport {
  std::string deviceName;
  double contextMs = 0.0;    // instance + device + pipeline-cache load
  double pipelinesMs = 0.0;  // creating every pipeline
  uint32_t pipelines = 0;
  size_t cacheBytesLoaded = 0;  // 0 on a cold start
  double firstStepMs = 0.0;     // first run of the step: lazy drivers (lavapipe) compile here
  double stepMs = 0.0;          // second run of the same step: pure execution
  double maxAbsError = 0.0;     // vs the CPU reference
  bool passed = false;
};

Expected<DeviceCheckReport> checkDevice(int deviceIndex);

}  // namespace kvscope::backend
