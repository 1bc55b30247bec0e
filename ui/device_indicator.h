#pragma once
// DeviceIndicator: the status-bar item that names the Vulkan device the engine will use,
// with a coloured dot for its state (probing, ready, error) and the device details in the
// tooltip. It is never blank: before the probe answers it says that it is looking. Long
// messages are elided in the bar and shown whole in the tooltip.

#include <QList>
#include <QWidget>

#include "ui/device_summary.h"

class QLabel;

namespace kvscope::ui {

class DeviceIndicator : public QWidget {
  Q_OBJECT

 public:
  explicit DeviceIndicator(QWidget* parent = nullptr);

  QString text() const;

  void showDevices(const QList<DeviceSummary>& devices, int chosen);
  void showError(const QString& message);

 private:
  enum class State { kProbing, kReady, kError };
  void setState(State state, const QString& text, const QString& toolTip);

  QLabel* m_dot;
  QLabel* m_text;  // elided so a long error cannot widen the window
  QString m_fullText;
};

}  // namespace kvscope::ui
