#include "ui/heatmap_axis.h"

#include <QPainter>
#include <QRect>
#include <algorithm>

namespace kvscope::ui {

void drawLayerLabels(QPainter& p, const QRect& plot, int layers, int labelWidth) {
  if (layers <= 0) return;
  const int every = std::max(1, layers / std::max(1, plot.height() / 14));
  for (int l = 0; l < layers; l += every) {
    const int y = plot.top() + (2 * l + 1) * plot.height() / (2 * layers);
    p.drawText(QRect(0, y - 8, labelWidth - 4, 16), Qt::AlignRight | Qt::AlignVCenter,
               QString::number(l));
  }
}

}  // namespace kvscope::ui
