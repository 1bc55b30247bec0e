#pragma once
// Vetting a Vulkan device before anyone chats on it. kvscope's Vulkan kernels
// have been tested on Mesa's lavapipe only; a GPU whose driver runs one of
// them differently would produce fluent-looking garbage. So the first time a
// device is used, and again whenever its driver or kvscope's kernels change,
// a few steps of the demo model run on the device and on the CPU backend, with
// an f16 cache and with a compressed one, and their logits are compared. The
// verdict is remembered in a small JSON file (by default
// $XDG_CACHE_HOME/kvscope/device-checks.json), so later starts pay only a
// device listing and a file read. A device that opens but fails to run the
// model fails the check.
//
// Pass: on every step the largest logit difference is within 2e-2 of the CPU
// row's spread, the mean within 1e-3, and the argmax agrees on all but at most
// one step. lavapipe measures 9.9e-5 and 7.5e-6 at 8 lanes
// (`kvscope-cli devices --vet`); a miscompiled kernel gives differences of the
// order of the spread itself.

#include <filesystem>
#include <string>

#include "core/error.h"

namespace kvscope::runtime {

struct DeviceVerdict {
  std::string device;  // the device's name
  std::string key;     // what identifies the device, driver and kernels
  bool passed = false;
  bool remembered = false;  // read from the verdict file, not measured now
  std::string failure;      // why the device could not run the model (then !passed)
  double worstRel = 0.0;    // max |logit diff| / spread over the steps
  double meanRel = 0.0;     // mean |logit diff| / spread
  uint32_t steps = 0, argmaxAgree = 0;
  // One line for the user, e.g. why the CPU backend is used instead.
  std::string summary() const;
};

// The verdict file in the user's cache folder; empty when there is none (the
// check then runs every time and nothing is written).
std::filesystem::path defaultVerdictFile();

// Vets Vulkan device `device` (-1: the one chooseDevice picks) on `demoModel`
// (empty: model::findDefaultModel()). Returns the remembered verdict when the
// file holds one for the same key; otherwise measures, then records it.
// Errors: no Vulkan device, no demo model, or the device failing to run at all
// (the caller then reports that error as it would without vetting).
Expected<DeviceVerdict> vetDevice(int device, const std::filesystem::path& verdictFile,
                                  const std::filesystem::path& demoModel = {});

}  // namespace kvscope::runtime
