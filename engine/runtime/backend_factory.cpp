#include "runtime/backend_factory.h"

#include <fmt/format.h>

#include "backend/backend.h"
#include "backend/cpu_backend.h"
#include "backend/vulkan_backend.h"
#include "gpu/device_info.h"
#include "kv/kv_policy.h"
#include "runtime/device_vetting.h"
#include "runtime/memory_estimate.h"

namespace kvscope::runtime {

std::string resolveBackendKind(std::string_view kind, int device) {
  if (kind != "auto") return std::string(kind);
  auto devices = gpu::listDevices();
  if (!devices.ok() || devices->empty()) return "cpu";
  auto chosen = gpu::chooseDevice(*devices, device);
  if (!chosen.ok()) return "vulkan";  // the Vulkan backend reports the bad index
  for (const auto& d : *devices)
    if (d.index == *chosen) return d.type == gpu::DeviceType::kCpu ? "cpu" : "vulkan";
  return "cpu";
}

std::optional<DeviceMemory> deviceMemory(const BackendChoice& choice) {
  if (resolveBackendKind(choice.kind, choice.device) != "vulkan") return std::nullopt;
  auto devices = gpu::listDevices();
  if (!devices.ok()) return std::nullopt;
  auto chosen = gpu::chooseDevice(*devices, choice.device);
  if (!chosen.ok()) return std::nullopt;
  for (const gpu::DeviceInfo& d : *devices) {
    if (d.index != *chosen || d.deviceLocalBytes == 0) continue;
    if (d.memoryBudgetBytes > 0)
      return DeviceMemory{d.memoryBudgetBytes, fmt::format("{}'s memory budget", d.name)};
    return DeviceMemory{d.deviceLocalBytes, fmt::format("{}'s memory", d.name)};
  }
  return std::nullopt;
}

namespace {

// chooseContext with the device's memory already looked up (a device listing
// opens a Vulkan instance: once per load is enough).
Expected<uint32_t> contextFor(const model::ModelFile& model, const BackendChoice& choice,
                              const std::optional<DeviceMemory>& memory, std::string* notice) {
  const uint32_t trained = model.config().contextLength;
  if (choice.contextLimit != 0) return choice.contextLimit;
  if (!memory) return trained;
  KVS_ASSIGN_OR_RETURN(const MemoryEstimate e,
                       estimateMemory(model, 0, choice.kvPolicy, memory->bytes));
  if (e.maxContextThatFits >= trained) return trained;
  // Nothing fits: the same error an explicit context would get.
  if (e.maxContextThatFits == 0) {
    KVS_TRY(checkFits(model, trained, choice.kvPolicy, memory->bytes, memory->name));
  }
  if (notice) {
    *notice = fmt::format(
        "The context is {} tokens, the longest that fits {} with this KV cache policy (the model "
        "was trained for {}).",
        e.maxContextThatFits, memory->name, trained);
  }
  return e.maxContextThatFits;
}

// checkDeviceFits with the memory looked up.
Status fitsMemory(const model::ModelFile& model, const BackendChoice& choice,
                  const std::optional<DeviceMemory>& memory) {
  if (!memory) return okStatus();
  KVS_ASSIGN_OR_RETURN(const uint32_t context, contextFor(model, choice, memory, nullptr));
  return checkFits(model, context, choice.kvPolicy, memory->bytes, memory->name);
}

}  // namespace

Expected<uint32_t> chooseContext(const model::ModelFile& model, const BackendChoice& choice,
                                 std::string* notice) {
  return contextFor(model, choice, choice.contextLimit ? std::nullopt : deviceMemory(choice),
                    notice);
}

Status checkDeviceFits(const model::ModelFile& model, const BackendChoice& choice) {
  return fitsMemory(model, choice, deviceMemory(choice));
}

Expected<std::string> checkChoice(const model::ModelFile& model, const BackendChoice& choice,
                                  std::string* notice) {
  std::string kind = resolveBackendKind(choice.kind, choice.device);
  if (kind != "cpu" && kind != "vulkan")
    return makeError(ErrorCode::kInvalidArgument,
                     "unknown backend '{}' (choose cpu, vulkan or auto)", kind);
  const kv::KvPolicy& policy = choice.kvPolicy;
  const auto& c = model.config();
  KVS_TRY(policy.resolve(backend::kvTarget(c)));
  if (kind == "vulkan") {
    // What the Vulkan kernels do not run yet goes to the CPU backend when the
    // user left the choice to kvscope.
    if (Status runs = backend::VulkanModel::checkWeightTypes(model); !runs.ok()) {
      if (choice.kind != "auto" || runs.error().code != ErrorCode::kUnsupported)
        return runs.takeError();
      kind = "cpu";
      if (notice) *notice = "The CPU backend runs this model: " + runs.error().message + ".";
    }
  }
  if (kind == "cpu") KVS_TRY(backend::CpuBackend::checkRuns(model));
  return kind;
}

Expected<std::unique_ptr<backend::Backend>> makeBackend(
    std::shared_ptr<const model::ModelFile> model, const BackendChoice& requested,
    std::string* notice) {
  if (notice) notice->clear();
  // Everything a user's choice can get wrong is refused before anything is
  // loaded or vetted.
  KVS_ASSIGN_OR_RETURN(std::string kind, checkChoice(*model, requested, notice));
  const kv::KvPolicy& policy = requested.kvPolicy;
  const auto& c = model->config();
  KVS_ASSIGN_OR_RETURN(std::vector<kv::LayerSchemes> schemes, policy.resolve(backend::kvTarget(c)));
  if (kind == "vulkan" && requested.vetDevice) {
    const std::filesystem::path file = requested.verdictFile.empty()
                                           ? defaultVerdictFile()
                                           : std::filesystem::path(requested.verdictFile);
    KVS_ASSIGN_OR_RETURN(const VetSpec spec, vetSpecFor(*model, policy));
    // A device that cannot run at all is reported below by the Vulkan backend;
    // one that runs but could not be vetted is used, with a notice.
    auto verdict = vetDevice(requested.device, file, spec);
    if (verdict.ok() && !verdict->passed) {
      if (!requested.fallBackToCpu)
        return makeError(ErrorCode::kDevice,
                         "{}; this KV cache policy is not used on it. Please report this device "
                         "and driver.",
                         verdict->finding());
      kind = "cpu";
      if (notice) *notice = verdict->summary();
    } else if (!verdict.ok() && notice) {
      *notice =
          "The Vulkan device was not checked against the CPU backend: " + verdict.error().message;
    }
  }
  BackendChoice choice = requested;
  choice.kind = kind;
  const std::optional<DeviceMemory> memory = kind == "vulkan" ? deviceMemory(choice) : std::nullopt;
  if (kind == "vulkan") {
    std::string shorter;
    KVS_ASSIGN_OR_RETURN(choice.contextLimit, contextFor(*model, choice, memory, &shorter));
    if (notice && !shorter.empty()) *notice += (notice->empty() ? "" : " ") + shorter;
  }
  kv::IndexerOptions attention = policy.attention;
  attention.diagnostic = choice.indexerDiagnostic;
  if (choice.kind == "cpu") {
    KVS_ASSIGN_OR_RETURN(auto b,
                         backend::CpuBackend::create(model, {.contextLimit = choice.contextLimit,
                                                             .threads = choice.threads,
                                                             .kvSchemes = std::move(schemes),
                                                             .kvSeed = policy.seed,
                                                             .twoPhase = policy.twoPhase,
                                                             .kvTail = policy.tail,
                                                             .matmul = choice.matmul,
                                                             .indexer = attention}));
    return std::unique_ptr<backend::Backend>(std::move(b));
  }
  KVS_TRY(fitsMemory(*model, choice, memory));
  KVS_ASSIGN_OR_RETURN(auto b,
                       backend::VulkanBackend::create(model, {.contextLimit = choice.contextLimit,
                                                              .device = choice.device,
                                                              .timing = choice.timing,
                                                              .timingEvery = choice.timingEvery,
                                                              .kvSchemes = std::move(schemes),
                                                              .kvSeed = policy.seed,
                                                              .twoPhase = policy.twoPhase,
                                                              .kvTail = policy.tail,
                                                              .indexer = attention}));
  return std::unique_ptr<backend::Backend>(std::move(b));
}

namespace {

// The spec the load's vetting ran (makeBackend), when it vetted.
std::optional<VetSpec> vettedAtLoad(const model::ModelFile& model, const BackendChoice& loaded) {
  if (!loaded.vetDevice || loaded.kind != "vulkan") return std::nullopt;
  auto spec = vetSpecFor(model, loaded.kvPolicy);
  return spec.ok() ? std::optional<VetSpec>(std::move(spec).value()) : std::nullopt;
}

// Whether the load's vetting ran every kernel `policy` needs. A policy the
// model cannot hold is left to makeBackend to report.
bool covered(const model::ModelFile& model, const std::optional<VetSpec>& vetted,
             const kv::KvPolicy& policy) {
  if (!vetted) return false;
  auto wanted = vetSpecFor(model, policy);
  return wanted.ok() && vetted->covers(*wanted);
}

}  // namespace

BackendFactory makeBackendFactory(std::shared_ptr<const model::ModelFile> model,
                                  const BackendChoice& choice) {
  std::optional<VetSpec> vetted = vettedAtLoad(*model, choice);
  return
      [model = std::move(model), choice, vetted = std::move(vetted)](const kv::KvPolicy& policy) {
        BackendChoice c = choice;
        c.kvPolicy = policy;
        // A policy switch never moves the session to another backend.
        c.fallBackToCpu = false;
        c.vetDevice = c.vetDevice && c.kind == "vulkan" && !covered(*model, vetted, policy);
        return makeBackend(model, c);
      };
}

}  // namespace kvscope::runtime
