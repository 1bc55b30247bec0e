#pragma once
// DeviceSummary: what the UI shows about one Vulkan device. A plain value type, copied
// out of the engine by EngineWorker and sent to the GUI thread through queued signals,
// so widgets never see engine structures. Registered with QMetaType by
// registerEngineTypes() (engine_worker.h).

#include <QList>
#include <QMetaType>
#include <QString>

namespace kvscope::ui {

struct DeviceSummary {
  int index = -1;      // the engine's enumeration index (what --device takes)
  QString name;        // "llvmpipe (LLVM 15.0.6, 256 bits)"
  QString kind;        // "Discrete GPU", "CPU", ...
  QString apiVersion;  // "1.3.230"
  QString driverInfo;  // "Mesa 22.3.6 (LLVM 15.0.6)"
  quint64 deviceLocalBytes = 0;
  // A Vulkan implementation on the CPU (Mesa's lavapipe): no GPU, and slower than
  // kvscope's own CPU backend.
  bool cpuEmulated = false;

  // One line for the status bar: "llvmpipe (LLVM 15.0.6, 256 bits) · CPU · Vulkan 1.3.230".
  QString statusText() const;
  // Driver and memory details for a tooltip.
  QString detailText() const;
};

}  // namespace kvscope::ui

Q_DECLARE_METATYPE(kvscope::ui::DeviceSummary)
