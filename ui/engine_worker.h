#pragma once
// EngineWorker: the only object in ui/ that calls the engine. It lives on its own thread
// (EngineThread owns it) and is driven by queued *Requested signals connected to its
// slots; every answer leaves as a signal carrying value types, so the GUI thread never
// blocks on the engine and never shares engine state. The engine is not thread-safe:
// serializing all calls on this one thread is what makes it safe to use.

#include <functional>
#include <vector>

#include <QList>
#include <QObject>
#include <QString>

#include "gpu/device_info.h"
#include "ui/device_summary.h"

namespace kvscope::ui {

// Registers the value types that cross the worker/GUI boundary. Idempotent.
void registerEngineTypes();

class EngineWorker : public QObject {
  Q_OBJECT

 public:
  // How devices are enumerated. The default asks the Vulkan loader; tests pass their own
  // list so they do not depend on the drivers of the machine they run on.
  using DeviceLister = std::function<Expected<std::vector<gpu::DeviceInfo>>()>;

  explicit EngineWorker(DeviceLister lister = {}, QObject* parent = nullptr);

 public slots:
  // Answers with devicesReady() or deviceError(), never both.
  void probeDevices();

 signals:
  // `chosen` indexes `devices` (not the engine's enumeration index).
  void devicesReady(const QList<kvscope::ui::DeviceSummary>& devices, int chosen);
  void deviceError(const QString& message);

 private:
  DeviceLister m_listDevices;
};

}  // namespace kvscope::ui
