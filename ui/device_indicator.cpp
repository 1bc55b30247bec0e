#include "ui/device_indicator.h"

#include <QHBoxLayout>
#include <QLabel>

#include "ui/theme.h"

namespace kvscope::ui {
namespace {

constexpr int kMaxTextWidth = 720;

}  // namespace

DeviceIndicator::DeviceIndicator(QWidget* parent)
    : QWidget(parent), m_dot(new QLabel(this)), m_text(new QLabel(this)) {
  setObjectName(QStringLiteral("deviceIndicator"));
  m_text->setObjectName(QStringLiteral("deviceStatusText"));
  m_dot->setFixedSize(8, 8);

  auto* row = new QHBoxLayout(this);
  row->setContentsMargins(8, 2, 8, 2);
  row->setSpacing(7);
  row->addWidget(m_dot);
  row->addWidget(m_text);

  setState(State::kProbing, tr("Looking for a Vulkan device…"), QString());
}

QString DeviceIndicator::text() const {
  return m_text->text();
}

void DeviceIndicator::showDevices(const QList<DeviceSummary>& devices, int chosen) {
  const DeviceSummary& device = devices.at(chosen);
  QString toolTip = device.detailText();
  if (devices.size() > 1) {
    toolTip += tr("\n\nOther devices (choose with KVSCOPE_DEVICE=<index>):");
    for (const DeviceSummary& other : devices) {
      if (other.index != device.index)
        toolTip += QStringLiteral("\n  %1: %2").arg(other.index).arg(other.statusText());
    }
  }
  setState(State::kReady, device.statusText(), toolTip);
}

void DeviceIndicator::showError(const QString& message) {
  setState(State::kError, message, message);
}

void DeviceIndicator::setState(State state, const QString& text, const QString& toolTip) {
  const ThemeColors& colors = themeColors();
  const QColor dot = state == State::kReady   ? colors.ok
                     : state == State::kError ? colors.error
                                              : colors.muted;
  m_dot->setStyleSheet(QStringLiteral("background: %1; border-radius: 4px;").arg(dot.name()));
  m_fullText = text;
  m_text->setText(m_text->fontMetrics().elidedText(text, Qt::ElideRight, kMaxTextWidth));
  setToolTip(toolTip);
}

}  // namespace kvscope::ui
