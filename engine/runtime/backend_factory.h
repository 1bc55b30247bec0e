#pragma once
// Creates the backend a user asked for by name ("cpu" or "vulkan"), so the
// CLI and the UI share one switch.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "backend/backend.h"
#include "backend/cpu_matmul.h"
#include "kv/kv_policy.h"
#include "model/model_file.h"

namespace kvscope::runtime {

struct BackendChoice {
  std::string kind = "vulkan";       // "cpu", "vulkan" or "auto"
  uint32_t contextLimit = 0;         // 0: the model's trained context
  int device = -1;                   // Vulkan device index (-1: automatic)
  unsigned threads = 0;              // CPU threads (0: all)
  // CPU products with quantized weights: int8 activations like llama.cpp's
  // CPU path (the default: what users run), or kExact float32 (the reference
  // the tests hold every kernel to). cpu_matmul.h states both bounds.
  cpu::MatmulPrecision matmul = cpu::MatmulPrecision::kInt8Activations;
  bool timing = true;    // GPU time per kernel class (costs ~20% decode on lavapipe)
  uint32_t timingEvery = 8;  // of which every Nth step (VulkanBackendOptions::timingEvery)
  kv::KvPolicy kvPolicy;  // the cache's schemes and attention options; default f16
  // The indexer's diagnostic mode (kv::IndexerOptions::diagnostic): dense
  // scores too, to report the attention mass each selection captured.
  bool indexerDiagnostic = false;
  // Vet the Vulkan device against the CPU backend before using it, on a small
  // model of this model's spec under this policy (runtime/device_vetting.h).
  bool vetDevice = true;
  // A device that fails vetting: the CPU backend with a notice, or (false) an
  // error naming what was found.
  bool fallBackToCpu = true;
  std::string verdictFile;  // where verdicts are remembered; empty: the user's cache folder
};

// The backend kind "auto" stands for: Vulkan when the device it would use is a
// GPU, the CPU backend when that device is a CPU implementation (lavapipe) or
// there is no Vulkan device at all — on a CPU device the CPU backend is many
// times faster (docs/RESULTS.md). Other kinds are returned unchanged.
std::string resolveBackendKind(std::string_view kind, int device = -1);

// The device memory a Vulkan choice loads into: what the driver says this
// process may hold (VK_EXT_memory_budget) where it says, else the largest
// device-local heap; none for the CPU backend or when no device answers.
struct DeviceMemory {
  uint64_t bytes = 0;
  std::string name;  // "NVIDIA H100's memory budget"
};
std::optional<DeviceMemory> deviceMemory(const BackendChoice& choice);

// The context a choice runs at: its contextLimit when set; otherwise, on a
// Vulkan device, the model's trained context or, when that does not fit the
// device's memory (estimateMemory, the choice's KV policy), the longest that
// does, with `notice` saying so. On the CPU backend 0 stays the trained
// context (its cache grows with the conversation in host memory).
Expected<uint32_t> chooseContext(const model::ModelFile& model, const BackendChoice& choice,
                                 std::string* notice);

// For a Vulkan choice: whether the model's weights and a KV cache full at the
// chosen context (chooseContext) fit the chosen device's memory (checkFits),
// so a context that cannot fit is refused with the longest one that would,
// before anything is allocated. OK for the CPU backend and when no device
// answers (the backend then reports what is wrong).
Status checkDeviceFits(const model::ModelFile& model, const BackendChoice& choice);

// What makeBackend checks before it allocates anything, so that a load can
// check it first (runtime/session_load.h): the backend kind, the KV policy
// against the model (every layer's schemes, options the backend runs), and
// what the Vulkan kernels run (VulkanModel::checkRuns). Returns the kind
// makeBackend builds: `choice.kind` resolved, or "cpu" when the choice was
// left to kvscope ("auto") and the Vulkan kernels do not run this model, with
// `notice` saying why.
Expected<std::string> checkChoice(const model::ModelFile& model, const BackendChoice& choice,
                                  std::string* notice = nullptr);

// `notice`, when given, receives a message for the user when the backend
// differs from the one asked for (a Vulkan device that failed vetting, a model
// the Vulkan kernels do not run under "auto"), and is cleared otherwise.
Expected<std::unique_ptr<backend::Backend>> makeBackend(
    std::shared_ptr<const model::ModelFile> model, const BackendChoice& choice,
    std::string* notice = nullptr);

// Builds a backend for one model and device under KV cache policy `policy`,
// with an empty cache; Session::setKvPolicy uses it.
using BackendFactory =
    std::function<Expected<std::unique_ptr<backend::Backend>>(const kv::KvPolicy& policy)>;

// The factory that builds what makeBackend(model, choice) builds, under any
// policy (pass the kind and context limit of the backend the session really
// got, so a switch never picks another). A policy
// whose kernels the load-time vetting did not run (vetSpecFor of choice's
// policy does not cover it) is vetted first; a device that fails it refuses
// the policy with an error rather than moving the session to another
// backend.
BackendFactory makeBackendFactory(std::shared_ptr<const model::ModelFile> model,
                                  const BackendChoice& choice);

}  // namespace kvscope::runtime
