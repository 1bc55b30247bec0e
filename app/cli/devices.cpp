// `kvscope-cli devices`: lists every Vulkan device the loader reports.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "gpu/device_info.h"

namespace kvscope::cli {

void registerDevices(CLI::App& app, const GlobalOptions& global, int& exitCode) {
  auto* cmd = app.add_subcommand("devices", "List Vulkan devices and their capabilities");
  static bool json = false;
  cmd->add_flag("--json", json, "Print JSON instead of a table");
  cmd->callback([&global, &exitCode] {
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
        for (const auto& h : d.heaps) heaps.push_back({{"bytes", h.bytes}, {"device_local", h.deviceLocal}});
        out.push_back({{"index", d.index}, {"name", d.name}, {"type", gpu::deviceTypeName(d.type)},
                       {"api_version", d.apiVersion}, {"driver", d.driverInfo},
                       {"heaps", heaps}, {"subgroup_size", d.subgroupSize},
                       {"fp16", d.shaderFloat16}, {"int8", d.shaderInt8},
                       {"storage16", d.storageBuffer16}, {"storage8", d.storageBuffer8},
                       {"unified_memory", d.unifiedMemory},
                       {"selected", chosen.ok() && *chosen == d.index}});
      }
      fmt::print("{}\n", out.dump(2));
      return;
    }
    for (const auto& d : *devices) {
      const bool selected = chosen.ok() && *chosen == d.index;
      fmt::print("{} [{}] {} ({}, Vulkan {}, {})\n", selected ? '*' : ' ', d.index, d.name,
                 gpu::deviceTypeName(d.type), d.apiVersion, d.driverInfo);
      for (size_t h = 0; h < d.heaps.size(); ++h) {
        fmt::print("      heap {}: {:.1f} GiB{}\n", h, static_cast<double>(d.heaps[h].bytes) / (1 << 30),
                   d.heaps[h].deviceLocal ? " device-local" : "");
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
