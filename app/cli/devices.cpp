// `kvscope-cli devices`: lists every Vulkan device the loader reports.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backend/device_check.h"
#include "cli/commands.h"
#include "backend/vulkan_model.h"
#include "cli/model_options.h"
#include "gpu/device_info.h"
#include "kv/kv_policy.h"
#include "runtime/device_vetting.h"

namespace kvscope::cli {

namespace {

int runCheck(int device, bool json) {
  auto report = backend::checkDevice(device);
  if (!report.ok()) {
    fmt::print(stderr, "error: {}\n", report.error().message);
    return 1;
  }
  const auto& r = *report;
  if (json) {
    nlohmann::json out = {{"device", r.deviceName},
                          {"context_ms", r.contextMs},
                          {"pipelines", r.pipelines},
                          {"pipelines_ms", r.pipelinesMs},
                          {"pipeline_cache_bytes_loaded", r.cacheBytesLoaded},
                          {"first_step_ms", r.firstStepMs},
                          {"step_ms", r.stepMs},
                          {"max_abs_error", r.maxAbsError},
                          {"passed", r.passed}};
    fmt::print("{}\n", out.dump(2));
  } else {
    fmt::print("device      {}\n", r.deviceName);
    fmt::print("context     {:.1f} ms (pipeline cache: {})\n", r.contextMs,
               r.cacheBytesLoaded ? fmt::format("{} bytes loaded", r.cacheBytesLoaded)
                                  : std::string("cold"));
    fmt::print("pipelines   {} in {:.1f} ms\n", r.pipelines, r.pipelinesMs);
    fmt::print("first step  {:.2f} ms (includes driver shader compilation on lavapipe)\n",
               r.firstStepMs);
    fmt::print("test step   {:.2f} ms, max |error| vs CPU {:.2e}: {}\n", r.stepMs, r.maxAbsError,
               r.passed ? "ok" : "FAILED");
  }
  return r.passed ? 0 : 1;
}

// Measures the device against the CPU backend as generate, chat and the app do
// before a model first runs on it (a small model of `modelPath`'s spec under
// `policyText`), without reading or writing the remembered verdicts.
Expected<runtime::DeviceVerdict> vetModel(int device, const std::string& modelPath,
                                          const std::string& policyText) {
  KVS_ASSIGN_OR_RETURN(const auto model, openModelOrDemo(modelPath));
  KVS_ASSIGN_OR_RETURN(const kv::KvPolicy policy, policyText.empty()
                                                      ? kv::defaultKvPolicy()
                                                      : kv::KvPolicy::parse(policyText));
  KVS_TRY(backend::VulkanModel::checkWeightTypes(*model));
  KVS_ASSIGN_OR_RETURN(const runtime::VetSpec spec, runtime::vetSpecFor(*model, policy));
  return runtime::vetDevice(device, {}, spec);
}

int runVet(int device, bool json, const std::string& modelPath, const std::string& policyText) {
  auto verdict = vetModel(device, modelPath, policyText);
  if (!verdict.ok()) {
    fmt::print(stderr, "error: {}\n", verdict.error().message);
    return 1;
  }
  const auto& v = *verdict;
  if (json) {
    nlohmann::json out = {{"device", v.device},
                          {"model", v.model},
                          {"passed", v.passed},
                          {"worst_rel", v.worstRel},
                          {"mean_rel", v.meanRel},
                          {"steps", v.steps},
                          {"argmax_agree", v.argmaxAgree},
                          {"selecting_steps", v.selectingSteps},
                          {"failure", v.failure},
                          {"key", v.key}};
    fmt::print("{}\n", out.dump(2));
  } else {
    fmt::print("{}\n", v.summary());
  }
  return v.passed ? 0 : 1;
}

}  // namespace

void registerDevices(CLI::App& app, const GlobalOptions& global, int& exitCode) {
  auto* cmd = app.add_subcommand("devices", "List Vulkan devices and their capabilities");
  static bool json = false;
  static bool check = false;
  static bool vet = false;
  cmd->add_flag("--json", json, "Print JSON instead of a table");
  cmd->add_flag("--check", check,
                "Open the selected device, build every pipeline and run a test step");
  CLI::Option* vetFlag = cmd->add_flag("--vet", vet,
                "Run a small model of the model's spec (-m; default the demo model) on the "
                "selected device and on the CPU backend and compare their logits: the check done "
                "before a model first runs on a device");
  static std::string modelPath, policy;
  addModelPathOption(cmd, modelPath);
  cmd->get_option("--model")->needs(vetFlag);
  cmd->add_option("--kv-policy", policy,
                  "With --vet: the KV cache policy to vet (kv/kv_policy.h; default the app's "
                  "default, auto)")
      ->needs(vetFlag);
  cmd->callback([&global, &exitCode] {
    if (check) {
      exitCode = runCheck(global.device, json);
      return;
    }
    if (vet) {
      exitCode = runVet(global.device, json, modelPath, policy);
      return;
    }
    auto devices = gpu::listDevices();
    if (!devices.ok()) {
      fmt::print(stderr, "error: {}\n", devices.error().message);
      exitCode = 1;
      return;
    }
    auto chosen = gpu::chooseDevice(*devices, global.device);
    if (json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& d : *devices) {
        nlohmann::json heaps = nlohmann::json::array();
        for (const auto& h : d.heaps)
          heaps.push_back({{"bytes", h.bytes}, {"device_local", h.deviceLocal}});
        out.push_back({{"index", d.index},
                       {"name", d.name},
                       {"type", gpu::deviceTypeName(d.type)},
                       {"api_version", d.apiVersion},
                       {"driver", d.driverInfo},
                       {"heaps", heaps},
                       {"memory_budget", d.memoryBudgetBytes},
                       {"subgroup_size", d.subgroupSize},
                       {"fp16", d.shaderFloat16},
                       {"int8", d.shaderInt8},
                       {"storage16", d.storageBuffer16},
                       {"storage8", d.storageBuffer8},
                       {"unified_memory", d.unifiedMemory},
                       {"selected", chosen.ok() && *chosen == d.index}});
      }
      fmt::print("{}\n", out.dump(2));
      return;
    }
    for (const auto& d : *devices) {
      const bool selected = chosen.ok() && *chosen == d.index;
      const std::string budget =
          d.memoryBudgetBytes
              ? fmt::format(", {:.1f} GiB free", static_cast<double>(d.memoryBudgetBytes) / (1 << 30))
              : std::string();
      fmt::print("{} [{}] {} ({}, Vulkan {}, {})\n", selected ? '*' : ' ', d.index, d.name,
                 gpu::deviceTypeName(d.type), d.apiVersion, d.driverInfo);
      for (size_t h = 0; h < d.heaps.size(); ++h) {
        const bool largest = d.heaps[h].deviceLocal && d.heaps[h].bytes == d.deviceLocalBytes;
        fmt::print("      heap {}: {:.1f} GiB{}{}\n", h,
                   static_cast<double>(d.heaps[h].bytes) / (1 << 30),
                   d.heaps[h].deviceLocal ? " device-local" : "", largest ? budget : "");
      }
      fmt::print("      subgroup {} | fp16 {} | int8 {} | 16-bit storage {} | 8-bit storage {}{}\n",
                 d.subgroupSize, d.shaderFloat16 ? "yes" : "no", d.shaderInt8 ? "yes" : "no",
                 d.storageBuffer16 ? "yes" : "no", d.storageBuffer8 ? "yes" : "no",
                 d.unifiedMemory ? " | unified memory" : "");
    }
    if (!chosen.ok()) {
      fmt::print(stderr, "error: {}\n", chosen.error().message);
      exitCode = 1;
    }
  });
}

}  // namespace kvscope::cli
