#include "ui/engine_worker.h"

namespace kvscope::ui {
namespace {

QString kindName(gpu::DeviceType type) {
  switch (type) {
    case gpu::DeviceType::kDiscrete:
      return QStringLiteral("Discrete GPU");
    case gpu::DeviceType::kIntegrated:
      return QStringLiteral("Integrated GPU");
    case gpu::DeviceType::kVirtual:
      return QStringLiteral("Virtual GPU");
    case gpu::DeviceType::kCpu:
      return QStringLiteral("CPU");
    case gpu::DeviceType::kOther:
      break;
  }
  return QStringLiteral("Other device");
}

DeviceSummary summarize(const gpu::DeviceInfo& info) {
  DeviceSummary s;
  s.index = info.index;
  s.name = QString::fromStdString(info.name);
  s.kind = kindName(info.type);
  s.apiVersion = QString::fromStdString(info.apiVersion);
  s.driverInfo = QString::fromStdString(info.driverInfo);
  s.deviceLocalBytes = info.deviceLocalBytes;
  return s;
}

QString userMessage(const Error& error) {
  // An empty message would leave the status bar blank, which reads as "still probing".
  if (error.message.empty()) return QStringLiteral("No usable Vulkan device was found.");
  return QString::fromStdString(error.message);
}

}  // namespace

void registerEngineTypes() {
  qRegisterMetaType<DeviceSummary>();
  qRegisterMetaType<QList<DeviceSummary>>();
}

EngineWorker::EngineWorker(DeviceLister lister, QObject* parent)
    : QObject(parent), m_listDevices(std::move(lister)) {
  if (!m_listDevices) m_listDevices = [] { return gpu::listDevices(); };
  registerEngineTypes();
}

void EngineWorker::probeDevices() {
  auto devices = m_listDevices();
  if (!devices.ok()) {
    emit deviceError(userMessage(devices.error()));
    return;
  }
  auto chosen = gpu::chooseDevice(*devices);
  if (!chosen.ok()) {
    emit deviceError(userMessage(chosen.error()));
    return;
  }
  QList<DeviceSummary> summaries;
  int chosenPosition = -1;
  for (const auto& info : *devices) {
    if (info.index == *chosen) chosenPosition = static_cast<int>(summaries.size());
    summaries.append(summarize(info));
  }
  if (chosenPosition < 0) {
    emit deviceError(
        QStringLiteral("The engine chose Vulkan device %1, which it did not list.").arg(*chosen));
    return;
  }
  emit devicesReady(summaries, chosenPosition);
}

}  // namespace kvscope::ui
