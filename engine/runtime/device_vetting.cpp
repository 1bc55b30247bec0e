#include "runtime/device_vetting.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "backend/cpu_backend.h"
#include "backend/logit_comparison.h"
#include "backend/vulkan_backend.h"
#include "core/log.h"
#include "core/paths.h"
#include "gpu/device_info.h"
#include "model/default_model.h"
#include "model/model_file.h"
#include "shaders/spirv_registry.h"

namespace kvscope::runtime {
namespace {

constexpr double kWorstRel = 2e-2, kMeanRel = 1e-3;
constexpr uint32_t kPrefill = 12, kDecode = 6;

// FNV-1a over every embedded SPIR-V word: changes whenever a kernel does.
uint64_t kernelsHash() {
  uint64_t h = 1469598103934665603ull;
  for (const shaders::SpirvEntry& e : shaders::all()) {
    for (uint32_t word : e.code) {
      for (int b = 0; b < 4; ++b) h = (h ^ ((word >> (8 * b)) & 0xffu)) * 1099511628211ull;
    }
  }
  return h;
}

std::string deviceKey(const gpu::DeviceInfo& d) {
  return fmt::format("{:04x}:{:04x} {} | {} | Vulkan {} | kernels {:016x}", d.vendorId, d.deviceId,
                     d.name, d.driverInfo, d.apiVersion, kernelsHash());
}

nlohmann::json readVerdicts(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return nlohmann::json::object();
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : nlohmann::json::object();  // a corrupt file is measured anew
}

// The remembered verdict for `v.key`, when the file holds a well-formed one.
bool readVerdict(const nlohmann::json& all, DeviceVerdict& v) {
  const auto it = all.find(v.key);
  if (it == all.end() || !it->is_object()) return false;
  const nlohmann::json& e = *it;
  for (const char* field : {"worst_rel", "mean_rel", "steps", "argmax_agree"})
    if (!e.contains(field) || !e[field].is_number()) return false;
  if (!e.contains("passed") || !e["passed"].is_boolean()) return false;
  if (e.contains("failure") && !e["failure"].is_string()) return false;
  v.passed = e["passed"].get<bool>();
  v.worstRel = e["worst_rel"].get<double>();
  v.meanRel = e["mean_rel"].get<double>();
  v.steps = e["steps"].get<uint32_t>();
  v.argmaxAgree = e["argmax_agree"].get<uint32_t>();
  v.failure = e.value("failure", std::string());
  v.remembered = true;
  return true;
}

// Records `v`, dropping verdicts of other kernel builds (they are never read again).
void writeVerdict(const std::filesystem::path& file, nlohmann::json all, const DeviceVerdict& v) {
  // The key ends with this build's kernel hash (deviceKey): no need to hash again.
  const std::string kernels = v.key.substr(v.key.rfind("kernels "));
  for (auto it = all.begin(); it != all.end();) {
    if (it.key().find(kernels) == std::string::npos)
      it = all.erase(it);
    else
      ++it;
  }
  all[v.key] = {{"passed", v.passed}, {"worst_rel", v.worstRel},       {"mean_rel", v.meanRel},
                {"steps", v.steps},   {"argmax_agree", v.argmaxAgree}, {"failure", v.failure}};
  // Device and driver names come from the driver: replace what is not UTF-8.
  const std::string text = all.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  if (!paths::writeFileAtomic(file, text.data(), text.size()).ok())
    log::warn("could not remember the Vulkan device check in {}; it runs again next time",
              file.string());
}

// Runs the same tokens through both backends and adds every step's logits.
Status compare(backend::Backend& cpu, backend::Backend& gpu, uint32_t nVocab,
               backend::LogitComparison& c) {
  std::vector<int32_t> tokens;
  for (uint32_t i = 0; i < kPrefill + kDecode; ++i)
    tokens.push_back(static_cast<int32_t>((i * 37u + 11u) % nVocab));
  backend::Logits a, b;
  for (uint32_t at = 0; at < tokens.size(); at += at == 0 ? kPrefill : 1) {
    const uint32_t n = at == 0 ? kPrefill : 1;
    const backend::Batch batch{std::span(tokens).subspan(at, n)};
    KVS_TRY(cpu.forward(batch, a));
    KVS_TRY(gpu.forward(batch, b));
    c.add(a.last(), b.last());
  }
  return okStatus();
}

Expected<DeviceVerdict> measure(int device, const std::filesystem::path& demoModel,
                                DeviceVerdict verdict) {
  std::filesystem::path path = demoModel;
  if (path.empty()) {
    KVS_ASSIGN_OR_RETURN(path, model::findDefaultModel());
  }
  KVS_ASSIGN_OR_RETURN(auto opened, model::ModelFile::open(path));
  std::shared_ptr<const model::ModelFile> m(std::move(opened));
  const uint32_t nLayer = m->config().nLayer;
  backend::LogitComparison c;
  // The f16 cache, and the app's default compressed policy (q8_0 keys, turbo4
  // values), so the codec decoders are vetted too.
  for (bool compressed : {false, true}) {
    const std::vector<kv::LayerSchemes> schemes =
        compressed ? std::vector<kv::LayerSchemes>(nLayer, {"q8_0", "turbo4"})
                   : std::vector<kv::LayerSchemes>{};
    KVS_ASSIGN_OR_RETURN(auto cpu, backend::CpuBackend::create(m, {.kvSchemes = schemes}));
    KVS_ASSIGN_OR_RETURN(
        auto gpu,
        backend::VulkanBackend::create(
            m, {.device = device, .timing = false, .kvSchemes = schemes, .errorStride = 0}));
    // A device that opens but cannot run the model is the one to avoid most.
    if (Status s = compare(*cpu, *gpu, m->config().nVocab, c); !s.ok()) {
      verdict.failure = s.error().message;
      return verdict;
    }
  }
  verdict.worstRel = c.worstRel;
  verdict.meanRel = c.meanRel;
  verdict.steps = c.steps;
  verdict.argmaxAgree = c.argmaxAgree;
  verdict.passed = c.worstRel <= kWorstRel && c.meanRel <= kMeanRel && c.argmaxAgree + 1 >= c.steps;
  return verdict;
}

}  // namespace

std::string DeviceVerdict::summary() const {
  if (!failure.empty()) {
    return fmt::format(
        "{} failed to run the demo model ({}); kvscope uses the CPU backend instead. Please "
        "report this device and driver.",
        device, failure);
  }
  const std::string measured = fmt::format(
      "largest logit difference {:.1e} of the spread (allowed {:.0e}), mean {:.1e}, "
      "same top token on {}/{} steps",
      worstRel, kWorstRel, meanRel, argmaxAgree, steps);
  if (passed) return fmt::format("{} matches the CPU backend: {}", device, measured);
  return fmt::format(
      "{} gives results that differ from the CPU backend ({}); kvscope uses the CPU backend "
      "instead. Please report this device and driver.",
      device, measured);
}

std::filesystem::path defaultVerdictFile() {
  auto dir = paths::cacheDir();
  return dir.ok() ? *dir / "device-checks.json" : std::filesystem::path();
}

Expected<DeviceVerdict> vetDevice(int device, const std::filesystem::path& verdictFile,
                                  const std::filesystem::path& demoModel) {
  KVS_ASSIGN_OR_RETURN(auto devices, gpu::listDevices());
  KVS_ASSIGN_OR_RETURN(const int index, gpu::chooseDevice(devices, device));
  const auto found = std::find_if(devices.begin(), devices.end(),
                                  [&](const gpu::DeviceInfo& d) { return d.index == index; });
  if (found == devices.end())
    return makeError(ErrorCode::kDevice, "Vulkan device {} is not in the device list", index);
  const gpu::DeviceInfo& info = *found;
  DeviceVerdict verdict{.device = info.name, .key = deviceKey(info)};

  nlohmann::json all = verdictFile.empty() ? nlohmann::json::object() : readVerdicts(verdictFile);
  if (readVerdict(all, verdict)) return verdict;
  KVS_ASSIGN_OR_RETURN(verdict, measure(index, demoModel, std::move(verdict)));
  if (!verdictFile.empty()) writeVerdict(verdictFile, std::move(all), verdict);
  return verdict;
}

}  // namespace kvscope::runtime
