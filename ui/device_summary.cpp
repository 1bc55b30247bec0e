#include "ui/device_summary.h"

#include <QLocale>
#include <QStringList>

namespace kvscope::ui {

QString DeviceSummary::statusText() const {
  QStringList parts{name};
  if (!kind.isEmpty()) parts << kind;
  if (!apiVersion.isEmpty()) parts << QStringLiteral("Vulkan %1").arg(apiVersion);
  return parts.join(QStringLiteral(" · "));
}

QString DeviceSummary::detailText() const {
  QStringList lines{QStringLiteral("Device %1: %2").arg(index).arg(name)};
  if (!driverInfo.isEmpty()) lines << QStringLiteral("Driver: %1").arg(driverInfo);
  if (deviceLocalBytes > 0) {
    lines << QStringLiteral("Device memory: %1")
                 .arg(QLocale().formattedDataSize(static_cast<qint64>(deviceLocalBytes)));
  }
  return lines.join(QLatin1Char('\n'));
}

}  // namespace kvscope::ui
